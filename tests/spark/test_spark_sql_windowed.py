"""Windowed sources end to end in the shared local[2] session (issue 30): a windowed CTAS writes
counts per user and one-minute window; its output topic is then declared again, as a user of
ksqlDB declares a windowed topic, with ``WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE'``:
a pull query over the table, and a CSAS over the stream filtering on WINDOWSTART/WINDOWEND
whose output keeps the windowed keys (read back raw and decoded as Kafka Streams'
WindowKeySchema), each against a plain-Python oracle of the input. (Push queries over windowed
sources compile the same decoding: tests/unit/sql/test_sql_windowed_sources.py.)"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from kafkalite.sql import windowed
from kafkalite.sql.ast import Window
from kafkalite.sql.engine import Engine
from tests.spark.conftest import engine_wait, sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for

T0 = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
CLICKS = [(f"u{i % 3}", T0 + i * 10_000) for i in range(14)]
MINUTE = Window("TUMBLING", 60_000)


def _oracle() -> dict[tuple[str, int, int], int]:
    """Clicks per (user, window start, window end)."""
    counts: dict[tuple[str, int, int], int] = {}
    for user, ts in CLICKS:
        start = ts - ts % 60_000
        counts[(user, start, start + 60_000)] = counts.get((user, start, start + 60_000), 0) + 1
    return counts


def _read_windowed(bootstrap: str, topic: str) -> dict[tuple[str, int, int], dict[str, Any]]:
    """A topic of time-windowed keys as a table: the latest value per (key, start, end)."""
    out: dict[tuple[str, int, int], dict[str, Any]] = {}
    for m in read_committed(bootstrap, topic):
        key, start, end = windowed.decode_key(m.key(), MINUTE)
        out[(key.decode(), start, end)] = json.loads(m.value())
    return out


def test_a_windowed_topic_declared_as_a_table_and_a_stream(spark: Any, kafka: Any, tmp_path: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    config = sql_config(kafka.bootstrap, f"win_{suffix}_", tmp_path)
    clicks, counts, busy = f"clicks-{suffix}", f"counts-{suffix}", f"busy-{suffix}"
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM clicks (usr VARCHAR KEY, page STRING) WITH (KAFKA_TOPIC='{clicks}', "
                       "VALUE_FORMAT='JSON', PARTITIONS=1);")
        p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
        for user, ts in CLICKS:
            p.produce(clicks, json.dumps({"page": "/"}).encode(), user.encode(), timestamp=ts)
        assert p.flush(60) == 0
        oracle = _oracle()
        assert any(n > 1 for n in oracle.values()) and any(n == 1 for n in oracle.values())
        made = engine.execute(f"CREATE TABLE per_minute WITH (KAFKA_TOPIC='{counts}', PARTITIONS=1) AS SELECT usr, "
                              "COUNT(*) AS n FROM clicks WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY usr;")

        def written() -> dict[tuple[str, int, int], int]:
            return {k: v["N"] for k, v in _read_windowed(kafka.bootstrap, counts).items()}
        wait_for(lambda: written() == oracle, 120,
                 engine_wait(engine, "the windowed CTAS's output to match the oracle"))
        engine.execute(f"TERMINATE {made[0]['commandStatus']['queryId']};")  # one query at a time on local[2]

        # the CTAS's topic declared again, as ksqlDB reads a windowed topic
        engine.execute(f"CREATE TABLE minutes (usr VARCHAR PRIMARY KEY, n BIGINT) WITH (KAFKA_TOPIC='{counts}', "
                       "VALUE_FORMAT='JSON', WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');"
                       f"CREATE STREAM minute_stream (usr VARCHAR KEY, n BIGINT) WITH (KAFKA_TOPIC='{counts}', "
                       "VALUE_FORMAT='JSON', WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');")
        assert engine.execute("DESCRIBE minutes;")[0]["sourceDescription"]["windowType"] == "TUMBLING"
        pulled = engine.query("SELECT * FROM minutes WHERE usr = 'u1';")
        assert pulled.column_names == ["USR", "WINDOWSTART", "WINDOWEND", "N"]
        assert pulled.rows == sorted([[u, s, e, n] for (u, s, e), n in oracle.items() if u == "u1"],
                                     key=lambda r: tuple(str(x) for x in r))

        # a projection of the windowed stream decodes the window (WINDOWEND - WINDOWSTART is the
        # declared size) and writes windowed keys again
        made = engine.execute(f"CREATE STREAM busy WITH (KAFKA_TOPIC='{busy}', PARTITIONS=1) AS SELECT usr, n, "
                              "WINDOWSTART AS ws FROM minute_stream WHERE n > 1 AND WINDOWEND - WINDOWSTART = 60000;")
        want = {k: {"N": n, "WS": k[1]} for k, n in oracle.items() if n > 1}
        wait_for(lambda: _read_windowed(kafka.bootstrap, busy) == want, 120,
                 "the projection of the windowed stream, keyed by key and window")
        engine.execute(f"TERMINATE {made[0]['commandStatus']['queryId']};")
    finally:
        engine.stop()
