"""The registry's settings (Confluent's property names, one-line errors) and the Confluent
wire format of the Avro tools (magic byte, schema id, Avro binary; Avro's JSON encoding)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalite.registry import config, main, serde
from kafkalite.registry.client import RegisteredSchema


def test_properties_file_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "sr.properties"
    path.write_text("# comment\nlisteners=http://127.0.0.1:18081\nkafkastore.bootstrap.servers=PLAINTEXT://a:1,b:2\n"
                    "schema.compatibility.level=full_transitive\nhost.name: sr1.local\n")
    cfg = config.build(config.read_properties(path))
    assert (cfg.listen_host, cfg.listen_port, cfg.url) == ("127.0.0.1", 18081, "http://sr1.local:18081")
    assert cfg.bootstrap_servers == "a:1,b:2" and cfg.compatibility_level == "FULL_TRANSITIVE"
    assert (cfg.topic, cfg.group_id, cfg.replication_factor) == ("_schemas", "schema-registry", 3)


@pytest.mark.parametrize("props, needle", [
    ({}, "kafkastore.bootstrap.servers is required"),
    ({"kafkastore.bootstrap.servers": "a:1", "listeners": "https://x:1"}, "only http://"),
    ({"kafkastore.bootstrap.servers": "a:1", "schema.compatibility.level": "sideways"}, "schema.compatibility.level"),
    ({"kafkastore.bootstrap.servers": "a:1", "kafkastore.timeout.ms": "soon"}, "not an integer"),
    ({"kafkastore.bootstrap.servers": "a:1", "listeners": "http://x"}, "needs a port"),
])
def test_bad_settings_are_one_line_errors(props: dict, needle: str) -> None:
    with pytest.raises(config.ConfigError, match=needle):
        config.build(props)


def test_cli_reports_bad_config_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["--override", "listeners=http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kafkastore.bootstrap.servers is required" in err


SCHEMA = json.dumps({"type": "record", "name": "P", "fields": [
    {"name": "truck", "type": "string"}, {"name": "speed", "type": ["null", "double"], "default": None}]})


def test_wire_format_round_trip_and_json_encoding() -> None:
    parsed = serde.parse_avro(SCHEMA)
    datum = serde.from_json(parsed, '{"truck": "t1", "speed": {"double": 1.5}}')
    data = serde.encode(7, parsed, datum)
    assert data[:5] == b"\x00\x00\x00\x00\x07"
    reg = RegisteredSchema(7, "AVRO", SCHEMA)
    schema_id, schema, back = serde.decode(data, lambda i: (reg, parsed))
    assert (schema_id, back) == (7, {"truck": "t1", "speed": 1.5})
    assert json.loads(serde.to_json(schema, back)) == {"truck": "t1", "speed": {"double": 1.5}}


@pytest.mark.parametrize("data", [b"", b"\x01\x00\x00\x00\x07\x02x", b"\x00\x00\x00"])
def test_unframed_values_are_refused(data: bytes) -> None:
    with pytest.raises(serde.SerdeError):
        serde.decode(data, lambda i: (None, serde.parse_avro(SCHEMA)))   # type: ignore[arg-type,return-value]


def test_json_not_matching_the_schema() -> None:
    parsed = serde.parse_avro(SCHEMA)
    with pytest.raises(serde.SerdeError):
        serde.encode(1, parsed, serde.from_json(parsed, '{"truck": 5, "speed": null}'))
    with pytest.raises(serde.SerdeError):
        serde.from_json(parsed, "not json")


def test_references_resolve_in_the_tools_parser() -> None:
    addr = json.dumps({"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]})
    user = json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "Address"}]})
    parsed = serde.parse_avro(user, [("Address", addr)])
    assert serde.from_json(parsed, '{"a": {"city": "Oslo"}}') == {"a": {"city": "Oslo"}}
    with pytest.raises(serde.SerdeError):
        serde.parse_avro(user)
