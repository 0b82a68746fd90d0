"""A persistent query whose Spark query fails is restarted from its checkpoint (ksqlDB's retry with
back-off), in the shared local[2] session: an aggregating CTAS fails in the middle of a
micro-batch (an error injected once where its foreachBatch updates the state store, on the
driver), shows ERROR, is restarted after ksql.query.retry.backoff.initial.ms under the same id
and checkpoint, and its table ends equal to a plain count of the input (nothing lost or counted
twice); the pull-query state agrees."""
from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Producer

from kafkalite.sql import queries
from kafkalite.sql.engine import Engine
from tests.spark.conftest import sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for


def _produce(bootstrap: str, topic: str, trucks: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for t in trucks:
        p.produce(topic, json.dumps({"speed": 50}).encode(), t.encode())
    assert p.flush(60) == 0


def _latest(bootstrap: str, topic: str) -> dict[str, int]:
    return {m.key().decode(): json.loads(m.value())["N"] for m in read_committed(bootstrap, topic, quiet_s=3.0)
            if m.value() is not None}


def test_failed_ctas_is_restarted_from_its_checkpoint(spark: Any, kafka: Any, tmp_path: Any, monkeypatch: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    gps, counts = f"rgps-{suffix}", f"rcounts-{suffix}"
    config = sql_config(kafka.bootstrap, f"restart_{suffix}_", tmp_path, retry_backoff_initial_ms=300)
    fail = {"armed": False}
    update = queries.StateStore.update

    def failing_update(self: Any, rows: list[dict[str, Any]]) -> None:
        if fail["armed"] and rows:
            fail["armed"] = False
            raise RuntimeError("Python worker failed to connect back (injected)")
        update(self, rows)
    monkeypatch.setattr(queries.StateStore, "update", failing_update)
    first = [f"t{i % 3}" for i in range(30)]
    more = [f"t{i % 4}" for i in range(40)]
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM trucks (truck VARCHAR KEY, speed INT) "
                       f"WITH (KAFKA_TOPIC='{gps}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, gps, first)
        qid = engine.execute(f"CREATE TABLE counts WITH (KAFKA_TOPIC='{counts}', PARTITIONS=1) AS "
                             "SELECT truck, COUNT(*) AS n FROM trucks GROUP BY truck EMIT CHANGES;"
                             )[0]["commandStatus"]["queryId"]
        wait_for(lambda: _latest(kafka.bootstrap, counts) == dict(Counter(first)), 150, "the first counts")
        fail["armed"] = True                            # the next micro-batch fails once
        _produce(kafka.bootstrap, gps, more)
        wait_for(lambda: engine.restarts.get(qid) == 1, 150, "the failure and its restart")
        want = dict(Counter(first + more))
        wait_for(lambda: _latest(kafka.bootstrap, counts) == want, 150, "the counts after the restart")
        shown = engine.execute("SHOW QUERIES;")[0]["queries"]
        assert [(q["id"], q["state"]) for q in shown] == [(qid, "RUNNING")]
        errors = engine.execute(f"EXPLAIN {qid};")[0]["queryDescription"]["queryErrors"]
        assert "Python worker failed to connect back (injected)" in errors[0]["errorMessage"]
        pulled = engine.query("SELECT * FROM counts WHERE truck = 't3';")
        assert pulled.rows == [["t3", want["t3"]]]
    finally:
        engine.stop()
