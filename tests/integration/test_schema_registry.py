"""kafkalite-schema-registry against confluent-kafka's SchemaRegistryClient and serdes, with real
brokers: Avro and JSON values through kafkalite topics, evolution under every compatibility
level, deletes, references, bad HTTP input, and two instances with the primary killed (-9)."""
from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.client import Admin
from kafkalite.client.admin import TOPIC
from tests.support.waiting import wait_for


def record(name: str, fields: list[dict], namespace: str = "kafkalite.test") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": fields})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def roundtrip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to a fresh topic on kafkalite and consume them back with librdkafka."""
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        def more() -> bool:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            return len(got) >= len(values)
        wait_for(more, 60, f"{len(values)} records from {topic}")
    finally:
        c.close()
    return got


def http(url: str, method: str = "GET", body: bytes | None = None,
         ctype: str = "application/vnd.schemaregistry.v1+json") -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": ctype} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_avro_values_through_kafkalite(broker: Any, registry_factory: Any) -> None:
    """AvroSerializer registers the schema on first use, the framed values travel through a
    kafkalite topic, and AvroDeserializer decodes them by the id in each value; the same schema
    under another subject has the same id; _schemas is compacted with RF = min(3, brokers)."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    topic = unique("trucks")
    schema = record("Position", [{"name": "truck", "type": "string"}, {"name": "lat", "type": "double"},
                                 {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}])
    ser = AvroSerializer(sr, schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    rows = [{"truck": f"t{i}", "lat": 45.0 + i, "ts": 1700000000000 + i} for i in range(3)]
    values = [ser(r, ctx) for r in rows]
    magic, schema_id = struct.unpack(">bI", values[0][:5])
    assert magic == 0 and schema_id >= 1
    assert sr.get_latest_version(f"{topic}-value").schema_id == schema_id
    deser = AvroDeserializer(SchemaRegistryClient({"url": reg.url}))    # a fresh client: no cache
    decoded = [deser(v, ctx) for v in roundtrip(broker.bootstrap, topic, values)]
    assert [(d["truck"], d["lat"], d["ts"].timestamp()) for d in decoded] == \
        [(r["truck"], r["lat"], r["ts"] / 1000) for r in rows]
    assert sr.register_schema(f"{topic}-key", Schema(schema, "AVRO")) == schema_id
    assert sorted(sr.get_subjects_by_schema_id(schema_id)) == sorted([f"{topic}-key", f"{topic}-value"])
    with Admin(broker.bootstrap) as admin:
        assert admin.describe_configs(TOPIC, "_schemas", ["cleanup.policy"])["cleanup.policy"].value == "compact"
        md = admin.client.metadata(["_schemas"])
        assert len(md.topics["_schemas"].partitions) == 1
        assert len(md.topics["_schemas"].partitions[0].replicas) == 1      # min(3, 1 broker)


V1 = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]
WITH_DEFAULTED = V1 + [{"name": "email", "type": ["null", "string"], "default": None}]
WITH_REQUIRED = V1 + [{"name": "age", "type": "int"}]
WITHOUT_NAME = V1[:1]


@pytest.mark.parametrize("level, compatible, incompatible", [
    ("BACKWARD", WITH_DEFAULTED, WITH_REQUIRED),
    ("BACKWARD_TRANSITIVE", WITHOUT_NAME, WITH_REQUIRED),
    ("FORWARD", WITH_REQUIRED, WITHOUT_NAME),
    ("FORWARD_TRANSITIVE", WITH_DEFAULTED, WITHOUT_NAME),
    ("FULL", WITH_DEFAULTED, WITH_REQUIRED),
    ("FULL_TRANSITIVE", WITH_DEFAULTED, WITHOUT_NAME),
    ("NONE", WITH_REQUIRED, None),
])
def test_evolution_under_each_compatibility_level(broker: Any, registry_factory: Any, level: str,
                                                  compatible: list, incompatible: list | None) -> None:
    """Per level: a compatible change registers as the next version, an incompatible one is
    refused with HTTP 409 / error_code 409 and test_compatibility says so."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    subject = unique(f"evo-{level.lower()}")
    first = sr.register_schema(subject, Schema(record("User", V1), "AVRO"))
    assert sr.set_compatibility(subject, level)["compatibility"] == level
    assert sr.get_compatibility(subject) == level
    second = sr.register_schema(subject, Schema(record("User", compatible), "AVRO"))
    assert second != first and sr.get_latest_version(subject).version == 2
    if incompatible is None:
        return
    bad = Schema(record("User", incompatible), "AVRO")
    assert sr.test_compatibility(subject, bad) is False
    with pytest.raises(SchemaRegistryError, match="incompatible with an earlier schema") as exc:
        sr.register_schema(subject, bad)
    assert (exc.value.http_status_code, exc.value.error_code) == (409, 409)
    assert sr.get_versions(subject) == [1, 2]


def test_transitive_refuses_what_the_plain_level_accepts(broker: Any, registry_factory: Any) -> None:
    """v1 {id, name: string} -> v2 {id} -> v3 {id, name: int = 0}: BACKWARD checks v3 against v2
    only and accepts it; BACKWARD_TRANSITIVE also reads v1's data, where name is a string."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    v3 = Schema(record("User", [{"name": "id", "type": "long"}, {"name": "name", "type": "int", "default": 0}]), "AVRO")
    for level, ok in (("BACKWARD", True), ("BACKWARD_TRANSITIVE", False)):
        subject = unique("transitive")
        sr.set_compatibility(subject, level)
        sr.register_schema(subject, Schema(record("User", V1), "AVRO"))
        sr.register_schema(subject, Schema(record("User", WITHOUT_NAME), "AVRO"))
        assert sr.test_compatibility_all_versions(subject, v3) is ok
        if ok:
            sr.register_schema(subject, v3)
        else:
            with pytest.raises(SchemaRegistryError) as exc:
                sr.register_schema(subject, v3)
            assert exc.value.error_code == 409


def test_delete_and_reregister(broker: Any, registry_factory: Any) -> None:
    """Soft delete hides a version/subject (deleted=true still shows it, its id still decodes);
    a permanent delete needs the soft one first; re-registering the schema gives its old id."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    subject = unique("del")
    id1 = sr.register_schema(subject, Schema(record("User", V1), "AVRO"))
    id2 = sr.register_schema(subject, Schema(record("User", WITH_DEFAULTED), "AVRO"))
    assert sr.delete_version(subject, 2) == 2
    assert sr.get_versions(subject) == [1]
    with pytest.raises(SchemaRegistryError) as exc:
        sr.get_version(subject, 2)
    assert exc.value.error_code == 40402
    assert sr.delete_subject(subject) == [1]
    assert subject not in sr.get_subjects()
    fresh = SchemaRegistryClient({"url": reg.url})
    assert json.loads(fresh.get_schema(id2).schema_str)["name"] == "User"     # data written with it decodes
    assert fresh.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as exc:
        fresh.get_versions(subject)
    assert exc.value.error_code == 40401
    again = SchemaRegistryClient({"url": reg.url})
    assert again.register_schema(subject, Schema(record("User", V1), "AVRO")) == id1
    assert again.lookup_schema(subject, Schema(record("User", V1), "AVRO")).version == 1


def test_references(broker: Any, registry_factory: Any) -> None:
    """A schema referencing another subject's type: registered with its reference, serialized and
    deserialized by confluent-kafka (which resolves the reference through the registry), listed by
    referencedby, and the referenced version cannot be deleted while referenced."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    addr_subject, topic = unique("address"), unique("customers")
    address = record("Address", [{"name": "city", "type": "string"}])
    addr_id = sr.register_schema(addr_subject, Schema(address, "AVRO"))
    customer = Schema(record("Customer", [{"name": "name", "type": "string"},
                                          {"name": "home", "type": "kafkalite.test.Address"}]), "AVRO",
                      [SchemaReference("kafkalite.test.Address", addr_subject, 1)])
    cust_id = sr.register_schema(f"{topic}-value", customer)
    latest = sr.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == \
        [("kafkalite.test.Address", addr_subject, 1)]
    assert sr.get_referenced_by(addr_subject, 1) == [cust_id]
    ctx = SerializationContext(topic, MessageField.VALUE)
    value = AvroSerializer(sr, customer, conf={"auto.register.schemas": False, "use.latest.version": True})(
        {"name": "Ada", "home": {"city": "Paris"}}, ctx)
    assert struct.unpack(">bI", value[:5]) == (0, cust_id)
    [back] = roundtrip(broker.bootstrap, topic, [value])
    assert AvroDeserializer(SchemaRegistryClient({"url": reg.url}))(back, ctx) == {"name": "Ada", "home": {"city": "Paris"}}
    with pytest.raises(SchemaRegistryError) as exc:
        sr.delete_version(addr_subject, 1)
    assert exc.value.error_code == 42206
    assert addr_id != cust_id


def test_json_schema_serializer(broker: Any, registry_factory: Any) -> None:
    """JSONSerializer registers a JSON Schema and frames values; JSONDeserializer checks them;
    a narrowing change is refused under BACKWARD."""
    reg = registry_factory(broker.bootstrap)
    sr = SchemaRegistryClient({"url": reg.url})
    topic = unique("orders")
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"], "additionalProperties": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    value = JSONSerializer(schema, sr)({"id": 7, "item": "tyre"}, ctx)
    schema_id = struct.unpack(">bI", value[:5])[1]
    assert sr.get_schema(schema_id).schema_type == "JSON"
    [back] = roundtrip(broker.bootstrap, topic, [value])
    assert JSONDeserializer(schema, schema_registry_client=SchemaRegistryClient({"url": reg.url}))(back, ctx) == \
        {"id": 7, "item": "tyre"}
    narrowed = json.loads(schema)
    narrowed["properties"]["item"]["maxLength"] = 3
    with pytest.raises(SchemaRegistryError) as exc:
        sr.register_schema(f"{topic}-value", Schema(json.dumps(narrowed), "JSON"))
    assert exc.value.error_code == 409


def test_bad_http_input_gets_error_json(broker: Any, registry_factory: Any) -> None:
    """Invalid JSON, a wrong content type, an unknown subject, an invalid schema and a body over
    request.max.bytes each get Confluent's error JSON, and the registry keeps serving."""
    reg = registry_factory(broker.bootstrap, **{"request.max.bytes": "65536"})
    base = reg.url
    assert http(f"{base}/subjects/x/versions", "POST", b"{nope")[1]["error_code"] == 422
    assert http(f"{base}/subjects/x/versions", "POST", b'{"schema":"\\"string\\""}', "text/plain") == \
        (415, {"error_code": 415, "message": "HTTP 415 Unsupported Media Type: text/plain"})
    assert http(f"{base}/subjects/{unique('none')}/versions")[1]["error_code"] == 40401
    assert http(f"{base}/subjects/x/versions", "POST", b'{"schema":"{\\"type\\":\\"bogus\\"}"}')[1]["error_code"] == 42201
    status, body = http(f"{base}/subjects/x/versions", "POST", b"x" * 200_000)
    assert (status, body["error_code"]) == (413, 413)
    assert http(f"{base}/subjects/x/versions", "POST", b'{"schema":"\\"string\\""}')[0] == 200
    assert reg.alive


def test_two_instances_kill_the_primary(cluster_factory: Any, registry_factory: Any) -> None:
    """Two instances share _schemas (RF 2 on two brokers). Writes through the follower are
    forwarded; after kill -9 of the primary the follower takes over writes, new ids continue past
    every id ever given, and a third instance replays to the same id -> schema mapping."""
    cluster = cluster_factory(2)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    first = registry_factory(bootstrap)
    wait_for(lambda: "(this instance)" in first.log_path.read_text(), 30, "the first instance to be primary")
    second = registry_factory(bootstrap)
    wait_for(lambda: "primary is now " + first.url in second.log_path.read_text(), 30,
             "the second instance to learn the primary")
    ids: dict[int, str] = {}
    via_second = SchemaRegistryClient({"url": second.url})
    for i in range(3):
        schema = record(f"Before{i}", [{"name": "n", "type": "int"}])
        ids[via_second.register_schema(unique("pre"), Schema(schema, "AVRO"))] = schema
    assert sorted(ids) == [1, 2, 3]
    with Admin(bootstrap) as admin:
        assert len(admin.client.metadata(["_schemas"]).topics["_schemas"].partitions[0].replicas) == 2

    first.kill()
    after = record("After", [{"name": "n", "type": "int"}])

    def register_after() -> int | None:
        try:
            return SchemaRegistryClient({"url": second.url}).register_schema(unique("post"), Schema(after, "AVRO"))
        except SchemaRegistryError as exc:
            assert exc.http_status_code == 500 and exc.error_code in (50003, 50004), exc
            return None
    new_id = wait_for(register_after, 60, "the second instance to accept writes as primary", interval=0.5)
    assert new_id == 4 and new_id not in ids
    ids[new_id] = after
    assert "primary is now " + second.url + " (this instance)" in second.log_path.read_text()

    third = registry_factory(bootstrap)
    later = record("Later", [{"name": "n", "type": "int"}])
    ids[SchemaRegistryClient({"url": third.url}).register_schema(unique("late"), Schema(later, "AVRO"))] = later
    assert sorted(ids) == [1, 2, 3, 4, 5]
    for reg in (second, third):
        client = SchemaRegistryClient({"url": reg.url})
        for schema_id, text in ids.items():
            assert json.loads(client.get_schema(schema_id).schema_str)["name"] == json.loads(text)["name"]

    # SIGTERM: the primary leaves the group and exits cleanly; the third takes over the writes
    assert second.stop(15) == 0
    last = record("Last", [{"name": "n", "type": "int"}])

    def register_last() -> int | None:
        try:
            return SchemaRegistryClient({"url": third.url}).register_schema(unique("last"), Schema(last, "AVRO"))
        except SchemaRegistryError as exc:
            assert exc.http_status_code == 500 and exc.error_code in (50003, 50004), exc
            return None
    assert wait_for(register_last, 30, "the third instance to accept writes", interval=0.5) == 6


def avro_cli(tool: str, *args: str, stdin: str | None = None) -> Any:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", f"kafkalite.cli.{tool}", *args], input=stdin, text=True,
                          capture_output=True, timeout=90)


def test_avro_console_producer_and_consumer(broker: Any, registry_factory: Any) -> None:
    """kafkalite-avro-console-producer turns JSON lines (Avro JSON encoding, keyed) into framed
    Avro that confluent-kafka's AvroDeserializer reads; kafkalite-avro-console-consumer prints
    them back as the same JSON (with schema ids), and also decodes values confluent-kafka wrote."""
    reg = registry_factory(broker.bootstrap)
    topic = unique("avro-cli")
    schema = record("Pos", [{"name": "truck", "type": "string"},
                            {"name": "speed", "type": ["null", "double"], "default": None}])
    lines = ['{"truck": "t1", "speed": {"double": 61.5}}', '{"truck": "t2", "speed": null}']
    r = avro_cli("avro_console_producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                 "--property", f"schema.registry.url={reg.url}", "--property", f"value.schema={schema}",
                 "--property", "parse.key=true", "--property", "key.separator=|",
                 "--property", 'key.schema="string"', "--producer-property", "acks=all",
                 stdin="".join(f'"k{i}"|{line}\n' for i, line in enumerate(lines)))
    assert r.returncode == 0, r.stderr
    sr = SchemaRegistryClient({"url": reg.url})
    value_id = sr.get_latest_version(f"{topic}-value").schema_id
    key_id = sr.get_latest_version(f"{topic}-key").schema_id
    # a third record from confluent-kafka's own serializer, same schema
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, AvroSerializer(sr, schema)({"truck": "t3", "speed": 10.0}, ctx))
    assert p.flush(30) == 0
    r = avro_cli("avro_console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                 "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000",
                 "--property", f"schema.registry.url={reg.url}", "--property", "print.key=true",
                 "--property", "print.schema.ids=true")
    assert r.returncode == 0, r.stderr
    out = [line.split("\t") for line in r.stdout.splitlines()]
    assert [(json.loads(k), int(kid), json.loads(v), int(vid)) for k, kid, v, vid in out[:2]] == \
        [("k0", key_id, json.loads(lines[0]), value_id), ("k1", key_id, json.loads(lines[1]), value_id)]
    assert out[2][:2] == ["null", ""] and json.loads(out[2][2]) == {"truck": "t3", "speed": {"double": 10.0}}
    assert int(out[2][3]) == value_id
    # confluent-kafka reads what the console producer wrote
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        m = wait_for(lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(0.5)), 30, "a record")
    finally:
        c.close()
    assert AvroDeserializer(sr)(m.value(), ctx) == {"truck": "t1", "speed": 61.5}


def test_avro_console_tools_bad_input(broker: Any, registry_factory: Any) -> None:
    """A line not matching the schema, an incompatible schema and a value with an unknown id are
    one-line errors with exit code 1; --skip-message-on-error skips the bad value."""
    reg = registry_factory(broker.bootstrap)
    topic = unique("avro-bad")
    schema = record("Pos", [{"name": "truck", "type": "string"}])
    base = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--property", f"schema.registry.url={reg.url}"]
    r = avro_cli("avro_console_producer", *base, "--property", f"value.schema={schema}",
                 stdin='{"truck": "ok"}\n{"truck": 5}\n')
    assert r.returncode == 1 and r.stderr.startswith("Error: Error serializing Avro message on line 2"), r.stderr
    r = avro_cli("avro_console_producer", *base, "--property",
                 "value.schema=" + record("Pos", [{"name": "truck", "type": "string"}, {"name": "n", "type": "int"}]),
                 stdin='{"truck": "x", "n": 1}\n')
    assert r.returncode == 1 and "error code 409" in r.stderr, r.stderr
    r = avro_cli("avro_console_producer", *base, stdin="{}\n")
    assert r.returncode == 1 and "value schema is required" in r.stderr
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, b"\x00\x00\x00\x03\xe7\x02x")          # schema id 999: unknown
    assert p.flush(30) == 0
    consume = base + ["--from-beginning", "--max-messages", "2", "--timeout-ms", "10000"]
    r = avro_cli("avro_console_consumer", *consume)
    assert r.returncode == 1 and "Error deserializing Avro message" in r.stderr and "40403" not in r.stdout
    r = avro_cli("avro_console_consumer", *consume, "--skip-message-on-error")
    assert r.returncode == 0 and r.stdout.splitlines() == ['{"truck": "ok"}'], (r.stdout, r.stderr)
