"""A CSAS over an AVRO source whose registry schema has Avro logical types (long timestamp-millis,
int date, bytes decimal), in the shared local[2] session: the columns are inferred as ksqlDB
infers them (TIMESTAMP, DATE, DECIMAL), the TIMESTAMP column is the stream's ROWTIME, and the
output is written as AVRO with the same logical types (registered as ``<topic>-value``), each value
read back equal to what was produced."""
from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition as CTP

from kafkalite.registry.client import RegistryClient
from kafkalite.registry.serde import decode, encode, parse_avro
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from tests.support.waiting import wait_for

SCHEMA = {"type": "record", "name": "Reading", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}
UTC = datetime.timezone.utc


def _read(bootstrap: str, topic: str, registry: RegistryClient) -> list[dict[str, Any]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([CTP(topic, 0, 0)])
    out = []
    try:
        for m in c.consume(100, 3.0):
            if m.error() is None and m.value() is not None:
                def lookup(schema_id: int) -> Any:
                    found = registry.by_id(schema_id)
                    return found, parse_avro(found.schema)
                out.append(decode(m.value(), lookup)[2])
    finally:
        c.close()
    return sorted(out, key=lambda d: d["ID"])


def test_csas_over_avro_with_timestamp_date_and_decimal(spark: Any, kafka: Any, schema_registry: Any,
                                                        tmp_path: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    source, sink = f"readings-{suffix}", f"readings-out-{suffix}"
    registry = RegistryClient(schema_registry.url)
    schema_id = registry.register(f"{source}-value", json.dumps(SCHEMA))
    parsed = parse_avro(json.dumps(SCHEMA))
    base = datetime.datetime(2026, 11, 29, 6, 0, 0, 250000, tzinfo=UTC)
    rows = [{"id": i, "ts": base + datetime.timedelta(minutes=i), "day": datetime.date(2026, 11, i),
             "amount": decimal.Decimal(f"{i}.25")} for i in (1, 2, 3)]
    config = KsqlConfig(bootstrap_servers=kafka.bootstrap, service_id=f"avro_{suffix}_", state_dir=str(tmp_path),
                        schema_registry_url=schema_registry.url,
                        streams=(("auto.offset.reset", "earliest"), ("commit.interval.ms", "500")))
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM readings WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='AVRO', PARTITIONS=1, "
                       "TIMESTAMP='ts');")
        fields = engine.execute("DESCRIBE readings;")[0]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"]) for f in fields] == [
            ("ID", "BIGINT"), ("TS", "TIMESTAMP"), ("DAY", "DATE"), ("AMOUNT", "DECIMAL(10, 2)")]
        p = Producer({"bootstrap.servers": kafka.bootstrap})
        for r in rows:
            p.produce(source, encode(schema_id, parsed, r))
        assert p.flush(60) == 0
        engine.execute(f"CREATE STREAM out WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS "
                       "SELECT id, ts, day, amount, ROWTIME AS rt FROM readings WHERE id > 1;")
        got = wait_for(lambda: (lambda out: out if len(out) == 2 else None)(_read(kafka.bootstrap, sink, registry)),
                       150, "the CSAS output")
        assert got == [{"ID": r["id"], "TS": r["ts"], "DAY": r["day"], "AMOUNT": r["amount"],
                        "RT": int(r["ts"].timestamp() * 1000)} for r in rows[1:]]
        written = json.loads(registry.subject_version(f"{sink}-value")[1].schema)
        assert {f["name"]: f["type"][1] for f in written["fields"]}["TS"] == {"type": "long",
                                                                            "logicalType": "timestamp-millis"}
    finally:
        engine.stop()
