"""A CSAS over an AVRO source whose registry schema has Avro logical types (long timestamp-millis,
int date, bytes decimal), in the shared local[2] session: the columns are inferred as ksqlDB
infers them (TIMESTAMP, DATE, DECIMAL), the TIMESTAMP column is the stream's ROWTIME, and the
output is written as AVRO with the same logical types (registered as ``<topic>-value`` before the
statement is logged, the same schema the running query registers), each value read back equal to
what was produced. The CSAS reads a second stream over the topic pinned to the first schema by
``VALUE_SCHEMA_ID`` (columns named as its fields are) while the subject has a newer version."""
from __future__ import annotations

import datetime
import decimal
import json
import logging
import re
import uuid
from typing import Any

from confluent_kafka import Producer

from kafkalite.registry.client import RegistryClient
from kafkalite.registry.serde import decode, encode, parse_avro
from kafkalite.sql.engine import Engine
from tests.spark.conftest import sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for

SCHEMA = {"type": "record", "name": "Reading", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}
UTC = datetime.timezone.utc


def _read_keyed(bootstrap: str, topic: str, registry: RegistryClient) -> list[tuple[bytes | None, dict[str, Any]]]:
    def lookup(schema_id: int) -> Any:
        found = registry.by_id(schema_id)
        return found, parse_avro(found.schema)
    return [(m.key(), decode(m.value(), lookup)[2]) for m in read_committed(bootstrap, topic, quiet_s=3.0)
            if m.value() is not None]


def _read(bootstrap: str, topic: str, registry: RegistryClient) -> list[dict[str, Any]]:
    return sorted((datum for _, datum in _read_keyed(bootstrap, topic, registry)), key=lambda d: d["ID"])


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
    config = sql_config(kafka.bootstrap, f"avro_{suffix}_", tmp_path, schema_registry_url=schema_registry.url)
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM readings WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='AVRO', PARTITIONS=1, "
                       "TIMESTAMP='ts');")
        fields = engine.execute("DESCRIBE readings;")[0]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"]) for f in fields] == [
            ("ID", "BIGINT"), ("TS", "TIMESTAMP"), ("DAY", "DATE"), ("AMOUNT", "DECIMAL")]
        newer = dict(SCHEMA, fields=SCHEMA["fields"] + [{"name": "note", "type": ["null", "string"], "default": None}])
        registry.register(f"{source}-value", json.dumps(newer))
        engine.execute(f"CREATE STREAM pinned WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='AVRO', "
                       f"VALUE_SCHEMA_ID={schema_id}, TIMESTAMP='`ts`');")
        fields = engine.execute("DESCRIBE pinned;")[0]["sourceDescription"]["fields"]
        assert [f["name"] for f in fields] == ["id", "ts", "day", "amount"]
        p = Producer({"bootstrap.servers": kafka.bootstrap})
        for r in rows:
            p.produce(source, encode(schema_id, parsed, r))
        assert p.flush(60) == 0
        engine.execute(f"CREATE STREAM out WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS SELECT `id` AS id, "
                       "`ts` AS ts, `day` AS day, `amount` AS amount, ROWTIME AS rt FROM pinned WHERE `id` > 1;")
        got = wait_for(lambda: (lambda out: out if len(out) == 2 else None)(_read(kafka.bootstrap, sink, registry)),
                       150, "the CSAS output")
        assert got == [{"ID": r["id"], "TS": r["ts"], "DAY": r["day"], "AMOUNT": r["amount"],
                        "RT": int(r["ts"].timestamp() * 1000)} for r in rows[1:]]
        written = json.loads(registry.subject_version(f"{sink}-value")[1].schema)
        assert {f["name"]: f["type"][1] for f in written["fields"]}["TS"] == {"type": "long",
                                                                            "logicalType": "timestamp-millis"}
        assert registry.versions(f"{sink}-value") == [1]      # registered at the statement, unchanged at start
    finally:
        engine.stop()


ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    # a Connect map with INT keys, as Confluent's AvroData writes it (ksqlDB reads MAP<STRING, DOUBLE>)
    {"name": "prices", "type": {"type": "array", "items": {
        "type": "record", "name": "MapEntry", "namespace": "io.confluent.connect.avro",
        "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "double"}]}}},
    {"name": "item", "type": {"type": "record", "name": "Item", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}]}


def _read_json(bootstrap: str, topic: str, count: int) -> list[dict[str, Any]] | None:
    out = [json.loads(m.value()) for m in read_committed(bootstrap, topic, quiet_s=3.0) if m.value() is not None]
    return sorted(out, key=lambda d: d["ID"]) if len(out) >= count else None


def test_collections_in_queries_json_dates_and_an_avro_table_restored(spark: Any, kafka: Any, schema_registry: Any,
                                                                      tmp_path: Any, caplog: Any) -> None:
    """AVRO source with an array, a Connect map with INT keys and a record -> CSAS with subscripts,
    ``->`` and constructors written as JSON (DATE as days, also nested) -> CTAS reading those days
    back, written as AVRO -> the server restarted: pull queries answer from the state rebuilt from
    the AVRO output topic. Each step against the same rows computed in plain Python."""
    suffix = uuid.uuid4().hex[:6]
    source, flat, table = f"orders-{suffix}", f"flat-{suffix}", f"per-sku-{suffix}"
    registry = RegistryClient(schema_registry.url)
    schema_id = registry.register(f"{source}-value", json.dumps(ORDER))
    parsed = parse_avro(json.dumps(ORDER))
    rows = [{"id": i, "day": datetime.date(2026, 11, i), "tags": [f"t{i}", "x"],
             "prices": [{"key": i, "value": i * 1.5}, {"key": 100, "value": 2.0}],
             "item": {"sku": f"S{i % 2}", "qty": i}} for i in (1, 2, 3, 4)]
    days = {r["id"]: (r["day"] - datetime.date(1970, 1, 1)).days for r in rows}
    config = sql_config(kafka.bootstrap, f"coll_{suffix}_", tmp_path, schema_registry_url=schema_registry.url)
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM orders WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='AVRO', PARTITIONS=1);")
        fields = engine.execute("DESCRIBE orders;")[0]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"]) for f in fields][1:4] == [("DAY", "DATE"), ("TAGS", "ARRAY"),
                                                                          ("PRICES", "MAP")]
        p = Producer({"bootstrap.servers": kafka.bootstrap})
        for r in rows:
            p.produce(source, encode(schema_id, parsed, r))
        assert p.flush(60) == 0
        engine.execute(
            f"CREATE STREAM flat WITH (KAFKA_TOPIC='{flat}', VALUE_FORMAT='JSON', PARTITIONS=1) AS SELECT id, day, "
            "tags[1] AS first_tag, tags[-1] AS last_tag, tags[0] AS zero, prices['100'] AS p100, "
            "prices[CAST(id AS STRING)] AS own, item->sku AS sku, ARRAY[item->qty, id] AS nums, "
            "MAP('d' := day) AS days, STRUCT(s := item->sku, d := day) AS st FROM orders WHERE tags[2] = 'x';")
        engine.execute(f"CREATE TABLE per_sku WITH (KAFKA_TOPIC='{table}', VALUE_FORMAT='AVRO', PARTITIONS=1) AS "
                       "SELECT sku, COUNT(*) AS n, MAX(day) AS last_day, SUM(nums[1]) AS qty FROM flat GROUP BY sku;")
        got = wait_for(lambda: _read_json(kafka.bootstrap, flat, 4), 150, "the CSAS output")
        assert got == [{"ID": r["id"], "DAY": days[r["id"]], "FIRST_TAG": f"t{r['id']}", "LAST_TAG": "x", "ZERO": None,
                        "P100": 2.0, "OWN": r["id"] * 1.5, "SKU": r["item"]["sku"], "NUMS": [r["id"], r["id"]],
                        "DAYS": {"d": days[r["id"]]}, "ST": {"S": r["item"]["sku"], "D": days[r["id"]]}}
                       for r in rows]
        oracle = sorted([sku, sum(1 for r in rows if r["item"]["sku"] == sku),
                         max(r["day"] for r in rows if r["item"]["sku"] == sku).isoformat(),
                         sum(r["id"] for r in rows if r["item"]["sku"] == sku)] for sku in ("S0", "S1"))

        def pulled(e: Engine) -> list[list[Any]] | None:
            found = sorted(e.query("SELECT * FROM per_sku WHERE sku IN ('S0', 'S1');").rows)
            return found if found == oracle else None
        wait_for(lambda: pulled(engine), 150, "the CTAS state")

        def written() -> list[list[Any]] | None:          # the table's AVRO topic, the latest record per key
            latest = {key.decode(): [key.decode(), d["N"], d["LAST_DAY"].isoformat(), d["QTY"]]
                      for key, d in _read_keyed(kafka.bootstrap, table, registry) if key is not None}
            return oracle if sorted(latest.values()) == oracle else None
        wait_for(written, 150, "the CTAS output")          # committed before the server stops
        engine.stop()
        caplog.set_level(logging.INFO, logger="kafkalite.sql.engine")
        engine = Engine(config, spark)                   # a restart: replayed, resumed from the checkpoints
        engine.start()                                   # the table's state is restored before start returns
        assert re.search(rf"state of CTAS_PER_SKU_\d+ restored from [1-9]\d* records of {table}", caplog.text)
        assert sorted(engine.query("SELECT * FROM per_sku WHERE sku IN ('S0', 'S1');").rows) == oracle
    finally:
        engine.stop()
