"""The tools' client security options, without a broker: every admin tool takes ``--command-config``,
the console/perf/Avro producers and consumers take ``--producer.config``/``--consumer.config`` and
security keys among their ``--producer-property``/``--consumer-property`` items (the file first, the
items over it, as Kafka's tools merge them); bad files and values are one-line ToolErrors before any
connection; and Admin/Producer/Consumer hand the ClientSecurity to the KafkaClient they make."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import console_consumer, console_producer
from kafkalite.cli.common import ToolError, client_properties, client_security, command_config_security, split_security
from kafkalite.client.security import ClientSecurity

ADMIN_TOOLS = ["topics", "configs", "consumer_groups", "delete_records", "leader_election", "log_dirs",
               "reassign_partitions", "transactions", "acls"]
PRODUCER_TOOLS = ["console_producer", "producer_perf", "avro_console_producer"]
CONSUMER_TOOLS = ["console_consumer", "consumer_perf", "avro_console_consumer"]


def options_of(tool: str) -> set[str]:
    parser = importlib.import_module(f"kafkalite.cli.{tool}").build_parser()
    return {s for action in parser._actions for s in action.option_strings}


@pytest.mark.parametrize("tool", ADMIN_TOOLS)
def test_every_admin_tool_takes_command_config(tool: str) -> None:
    """One shared --command-config (from bootstrap_arg) for every tool that talks to brokers as an admin."""
    assert {"--bootstrap-server", "--command-config"} <= options_of(tool)


@pytest.mark.parametrize("tool, option", [(t, "--producer.config") for t in PRODUCER_TOOLS]
                         + [(t, "--consumer.config") for t in CONSUMER_TOOLS])
def test_producer_and_consumer_tools_take_a_client_config_file(tool: str, option: str) -> None:
    assert option in options_of(tool)


def test_command_config_reads_jaas_and_librdkafka_forms(tmp_path: Path) -> None:
    """A --command-config file with JAAS gives the SASL user; the CA must exist for TLS."""
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here, only that it exists\n")
    f = tmp_path / "admin.properties"
    f.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.location={ca}\n"
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                 'username="admin" password="pw";\n')
    args = importlib.import_module("kafkalite.cli.topics").build_parser().parse_args(
        ["--bootstrap-server", "h:1", "--list", "--command-config", str(f)])
    sec = command_config_security(args)
    assert (sec.protocol, sec.mechanism, sec.username, sec.password, sec.ca_location) == \
        ("SASL_SSL", "SCRAM-SHA-512", "admin", "pw", str(ca))
    no_file = importlib.import_module("kafkalite.cli.topics").build_parser().parse_args(
        ["--bootstrap-server", "h:1", "--list"])
    plain = command_config_security(no_file)
    assert (plain.protocol, plain.tls, plain.sasl) == ("PLAINTEXT", False, False)


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "TLS"}, "unknown security.protocol 'TLS'"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u",
      "sasl.password": "p"}, "unsupported sasl.mechanism 'GSSAPI'"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "SASL needs a user"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "nonsense"},
     "invalid sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
     "TLS CA file /nonexistent/ca.pem does not exist"),
])
def test_bad_security_values_are_one_line_tool_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        client_security(props)
    assert "\n" not in str(info.value)


def test_unreadable_or_malformed_files_are_tool_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"cannot read --producer.config .*missing"):
        client_properties(str(tmp_path / "missing"), None, "producer")
    binary = tmp_path / "binary.properties"
    binary.write_bytes(b"security.protocol=\xff\xfe\n")
    with pytest.raises(ToolError, match=r"cannot read --consumer.config .*binary.properties"):
        client_properties(str(binary), None, "consumer")


def test_java_properties_forms(tmp_path: Path) -> None:
    """The file is read as Java's Properties.load reads it (Kafka's tools use it): '=', ':' or
    whitespace separators, comments, continuation lines inside a JAAS entry."""
    f = tmp_path / "consumer.properties"
    f.write_text("# consumer\n! also a comment\nsecurity.protocol SASL_PLAINTEXT\nsasl.mechanism: PLAIN\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                 '    username="carol" password="c=1";\ngroup.id = g1\n')
    sec, rest = client_properties(str(f), None, "consumer")
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_PLAINTEXT", "PLAIN", "carol", "c=1")
    assert rest == {"group.id": "g1"}


def test_file_then_items_and_security_split_from_the_rest(tmp_path: Path) -> None:
    """Items override the file; security keys become ClientSecurity, the rest stay properties."""
    f = tmp_path / "producer.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n"
                 "sasl.password=old\nacks=all\nlinger.ms=7\n")
    sec, rest = client_properties(str(f), ["sasl.password=new", "linger.ms=9"], "producer")
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_PLAINTEXT", "PLAIN", "u", "new")
    assert rest == {"acks": "all", "linger.ms": "9"}
    assert console_producer.producer_options(rest) == {"acks": "all", "linger_ms": 9}
    assert split_security({"ssl.ca.location": "x", "sasl.mechanisms": "PLAIN", "group.id": "g"}) == \
        ({"ssl.ca.location": "x", "sasl.mechanisms": "PLAIN"}, {"group.id": "g"})


class Recorded(Exception):
    """Raised by the fake KafkaClient once it has seen its arguments."""


def test_admin_producer_consumer_pass_security_to_their_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkalite.client import admin, consumer, producer

    seen: list[Any] = []

    class FakeClient:
        def __init__(self, bootstrap: Any, **kwargs: Any) -> None:
            seen.append(kwargs.get("security"))
            raise Recorded

    sec = ClientSecurity("SASL_SSL", "SCRAM-SHA-256", "u", "p", "/ca.pem")
    for module, make in ((admin, lambda: admin.Admin("h:1", security=sec)),
                         (producer, lambda: producer.Producer("h:1", security=sec)),
                         (consumer, lambda: consumer.Consumer("h:1", security=sec))):
        monkeypatch.setattr(module, "KafkaClient", FakeClient)
        with pytest.raises(Recorded):
            make()
    assert seen == [sec, sec, sec]


def test_console_tools_build_security_before_connecting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console producer and consumer give their client the security from --*.config and the
    property items; a bad value stops them before any connection."""
    from kafkalite.client import consumer, producer

    seen: list[Any] = []

    class FakeClient:
        def __init__(self, bootstrap: Any, **kwargs: Any) -> None:
            seen.append(kwargs.get("security"))
            raise Recorded

    monkeypatch.setattr(producer, "KafkaClient", FakeClient)
    monkeypatch.setattr(consumer, "KafkaClient", FakeClient)
    f = tmp_path / "client.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n")
    with pytest.raises(Recorded):
        console_producer.main(["--bootstrap-server", "h:1", "--topic", "t", "--producer.config", str(f),
                               "--producer-property", "sasl.password=pw", "--producer-property", "acks=all"])
    with pytest.raises(Recorded):
        console_consumer.main(["--bootstrap-server", "h:1", "--topic", "t", "--consumer.config", str(f),
                               "--consumer-property", "sasl.password=pw2"])
    assert [(s.protocol, s.mechanism, s.username, s.password) for s in seen] == \
        [("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "pw"), ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "pw2")]
    with pytest.raises(ToolError, match="SASL needs a user"):
        console_producer.main(["--bootstrap-server", "h:1", "--topic", "t", "--producer.config", str(f)])
    assert len(seen) == 2
