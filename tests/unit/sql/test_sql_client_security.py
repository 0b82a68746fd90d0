"""ksql-server.properties' Kafka client security (mutual TLS, host name checking, SASL) reaches
every client the SQL server makes: its own (command topic, admin, INSERT producers, metadata), as
ClientSecurity, and its Spark queries, as the kafkalite source's and sink's ``kafka.*`` options,
which the source and sink parse back to the same ClientSecurity. No brokers, no Spark session:
recording doubles stand at the client and Spark boundaries."""
from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from kafkalite.client.security import ClientSecurity
from kafkalite.sql import command_topic as command_topic_mod
from kafkalite.sql import engine as engine_mod
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from tests.unit.sql.test_sql_engine_statements import FakeCommands, FakeSpark, Frame

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="trucks" password="s3cret";'
#: a SASL_SSL server with a client certificate (mutual TLS) and host name checking turned off
SECURED = {
    "listeners": "http://127.0.0.1:18088", "bootstrap.servers": "127.0.0.1:19093",
    "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
    "ssl.truststore.type": "PEM", "ssl.truststore.location": "/pki/ca.pem",
    "ssl.keystore.type": "PEM", "ssl.keystore.location": "/pki/client.pem", "ssl.key.password": "keypw",
    "ssl.endpoint.identification.algorithm": "",
    "ksql.streams.auto.offset.reset": "earliest", "spark.master": "local[1]",
}
EXPECTED = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "trucks", "s3cret", ca_location="/pki/ca.pem",
                          certificate_location="/pki/client.pem", key_location="/pki/client.pem",
                          key_password="keypw", check_hostname=False)


def test_the_config_keeps_every_security_property_and_nothing_else() -> None:
    config = KsqlConfig.from_properties(SECURED)
    assert dict(config.security_properties) == {k: v for k, v in SECURED.items()
                                                if k.startswith(("ssl.", "sasl.", "security."))}
    assert config.security == EXPECTED
    split = KsqlConfig.from_properties({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
                                        "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"})
    assert (split.security.certificate_location, split.security.key_location, split.security.check_hostname) == (
        "/c.pem", "/k.pem", True)
    plain = KsqlConfig.from_properties({"ksql.service.id": "x_"})
    assert plain.security_properties == () and KsqlConfig().security_properties == ()
    assert (plain.security.protocol, plain.security.tls, plain.security.sasl) == ("PLAINTEXT", False, False)


class Recorder:
    """Admin, KafkaClient and Producer at once: records who was made with which security."""

    made: list[tuple[str, ClientSecurity | None]] = []

    def __init__(self, *args: Any, security: ClientSecurity | None = None, client_id: str = "", **kw: Any) -> None:
        Recorder.made.append((client_id or type(self).__name__, security))

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def metadata(self, topics: list[str]) -> Any:
        return SimpleNamespace(topics={})                        # no topic exists yet

    def create_topics(self, topics: list[Any]) -> dict[str, None]:
        return {t.name: None for t in topics}

    def delete_topics(self, topics: list[str]) -> None:
        pass

    def send(self, *args: Any, callback: Any = None, **kw: Any) -> Any:
        done: Future = Future()
        if callback is not None:
            done.add_done_callback(callback)
        done.set_result(SimpleNamespace(offset=len(Recorder.made)))
        return done

    def close(self, *args: Any) -> None:
        pass


class Admin(Recorder):
    pass


class KafkaClient(Recorder):
    pass


def test_the_servers_own_clients_use_the_client_certificate(monkeypatch: Any) -> None:
    for module in (engine_mod, command_topic_mod):
        monkeypatch.setattr(module, "Admin", Admin)
        monkeypatch.setattr(module, "Producer", Recorder)
    monkeypatch.setattr(engine_mod, "KafkaClient", KafkaClient)
    Recorder.made = []
    engine = Engine(KsqlConfig.from_properties(SECURED), FakeSpark())
    engine.commands.ensure()
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);")
    engine.execute("INSERT INTO s (id, v) VALUES ('a', 1);")
    engine.execute("DROP STREAM s DELETE TOPIC;")
    made = [who for who, _ in Recorder.made]
    # the command topic made and written first; the stream applied from it creates its topic
    assert made == ["Admin", "ksql-command-producer", "KafkaClient", "Admin", "ksql-insert-default_", "Admin"]
    assert all(security == EXPECTED for _, security in Recorder.made)


def test_the_spark_queries_get_every_security_property(monkeypatch: Any) -> None:
    """A persistent query's reader and writer get the ``kafka.``-prefixed properties, and the
    kafkalite source and sink read from them the server's own ClientSecurity."""
    from pyspark.sql.types import BinaryType, StructType

    from spark_integration.options import parse_options
    from spark_integration.sink_options import parse_sink_options

    options: dict[int, dict[str, str]] = {}                     # per reader/writer double
    orig = Frame.__getattr__

    def spy(self: Frame, name: str) -> Any:
        if name == "option":
            return lambda k, v: options.setdefault(id(self), {}).update({k: v}) or self
        return orig(self, name)
    monkeypatch.setattr(Frame, "__getattr__", spy)
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: SimpleNamespace(start=lambda: None))
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_sink_topic", lambda self, *a: None)
    engine = Engine(KsqlConfig.from_properties(SECURED), FakeSpark())
    engine.commands = FakeCommands()  # type: ignore[assignment]
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                   "CREATE STREAM fast AS SELECT id, v FROM s WHERE v > 80;")
    reader = next(o for o in options.values() if "subscribe" in o)
    writer = next(o for o in options.values() if "deliveryGuarantee" in o)
    prefixed = {f"kafka.{k}": v for k, v in SECURED.items() if k.startswith(("ssl.", "sasl.", "security."))}
    assert prefixed.items() <= reader.items() and prefixed.items() <= writer.items()
    assert (reader["subscribe"], writer["topic"]) == ("s", "FAST")
    assert parse_options(reader, streaming=True).security == EXPECTED
    schema = StructType().add("key", BinaryType()).add("value", BinaryType())
    assert parse_sink_options(writer, schema).security == EXPECTED


@pytest.mark.parametrize("props", [{}, {"security.protocol": "PLAINTEXT"}])
def test_a_plaintext_server_gives_its_queries_no_security_options(props: dict[str, str]) -> None:
    engine = Engine(KsqlConfig.from_properties(props), FakeSpark())
    assert engine._security_options() == {f"kafka.{k}": v for k, v in props.items()}
