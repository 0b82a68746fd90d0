"""Beyond one machine: the kafkalite source, the sink and a persistent SQL query on a Spark
standalone cluster (a master and two one-core workers as separate processes, started from
PySpark's own launcher: tests/support/spark_cluster.py), with ``spark.master=spark://...``.

The drivers are processes of their own (this pytest process may hold the local[2] session of the
other Spark tests, and one process has one SparkContext): ``kafkalite-sql-server`` with
``spark.master`` in its properties, and the exactly-once pipeline example
(``spark_integration.examples.pipeline --master spark://...``). The executors get what they
run by pickling (the source's partitions, the sink's options) and reach the broker themselves;
they run the project's interpreter with its path, which the workers do not have in their own
environment (the drivers pass ``spark.pyspark.python`` / ``spark.executorEnv.PYTHONPATH``).

Then failures in the middle of a micro-batch (a batch Spark has logged in ``offsets/`` but not
yet in ``commits/``): a worker killed with kill -9 together with its executor (the query goes on
with the other worker), then the driver killed with kill -9 and started again from the
checkpoint. A ``read_committed`` verifier finds every input record exactly once in the output.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.spark.conftest import new_topic, produce
from tests.spark.test_sink_units import _read_committed
from tests.support.spark_cluster import SparkStandalone
from tests.support.waiting import wait_for
from tests.support.sql_rest import ksql_call
from tests.support.sql_server import SqlServerFactory

ROOT = Path(__file__).resolve().parents[2]

#: what every driver here runs with: reachable on 127.0.0.1, small heaps, one core per executor
DRIVER_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
               "spark.driver.memory": "512m", "spark.executor.memory": "512m", "spark.executor.cores": "1",
               "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
               "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{ROOT / 'tests/spark/log4j2.properties'}"}


def _driver_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME")}
    env.update({"PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    return env


def _batches(ckpt: Path, log: str) -> list[int]:
    d = ckpt / log
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def _mid_batch(ckpt: Path, done_before: int) -> bool:
    """A batch after ``done_before`` is planned (offsets log) and not committed (commits log)."""
    offsets, commits = _batches(ckpt, "offsets"), _batches(ckpt, "commits")
    return bool(offsets) and offsets[-1] > done_before and (not commits or offsets[-1] > commits[-1])


def _python_workers(cluster: SparkStandalone) -> list[dict[str, str]]:
    """The cluster's Python worker processes (``python -m pyspark.daemon`` under the executors):
    their interpreter and PYTHONPATH."""
    found = []
    for pid in cluster.tagged_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            env = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in e)
        except OSError:
            continue
        if "pyspark.daemon" in argv:
            found.append({"python": argv[0], "PYTHONPATH": env.get("PYTHONPATH", "")})
    return found


def _call(url: str, body: Any = None) -> tuple[int, Any]:
    return ksql_call(url, body, timeout=300)


def test_persistent_sql_query_runs_on_the_cluster(spark_standalone: SparkStandalone, kafka: Any,
                                                   sql_server_factory: SqlServerFactory) -> None:
    """kafkalite-sql-server with spark.master=spark://...: a filtering CSAS over a JSON stream
    runs on the cluster's executors; its output (exactly once) holds each fast reading once."""
    cluster = spark_standalone
    suffix = uuid.uuid4().hex[:6]
    gps, alerts = f"sql-gps-{suffix}", f"sql-alerts-{suffix}"
    conf = {**DRIVER_CONF, "spark.executorEnv.PYTHONPATH": str(ROOT), "spark.pyspark.python": sys.executable}
    server = sql_server_factory(kafka.bootstrap, {"ksql.service.id": f"cluster_{suffix}_",
                                                  "ksql.streams.auto.offset.reset": "earliest",
                                                  "spark.master": cluster.url, **conf}, env=_driver_env())
    url, log = server.url, server.log_path
    try:
        code, body = _call(url + "/ksql", {"ksql": f"CREATE STREAM trucks (truck VARCHAR KEY, speed DOUBLE) WITH "
                                                   f"(KAFKA_TOPIC='{gps}', VALUE_FORMAT='JSON', PARTITIONS=2);"})
        assert code == 200, body
        readings = [(f"t{i % 5}", float((i * 13) % 120)) for i in range(400)]
        p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
        for truck, speed in readings:
            p.produce(gps, json.dumps({"truck": truck, "speed": speed}).encode(), truck.encode())
        assert p.flush(60) == 0
        code, body = _call(url + "/ksql", {"ksql": f"CREATE STREAM fast WITH (KAFKA_TOPIC='{alerts}', PARTITIONS=2) "
                                                   "AS SELECT truck, speed FROM trucks WHERE speed > 100;"})
        assert code == 200, body
        query_id = body[0]["commandStatus"]["queryId"]
        expected = Counter(json.dumps({"SPEED": s}, separators=(",", ":")).encode() for _, s in readings if s > 100)

        def output() -> Counter[bytes]:
            return Counter(json.dumps(json.loads(v), separators=(",", ":")).encode()
                           for v in _read_committed(kafka.bootstrap, alerts, 2))
        wait_for(lambda: output() == expected, 240, f"the query's output (log: {log})", 1.0)
        # it ran on the cluster: the application is the master's, with executors on the workers
        apps = (cluster.state() or {}).get("activeapps", [])
        assert [a["name"] for a in apps] == [f"kafkalite-sql-cluster_{suffix}_"], apps
        workers = _python_workers(cluster)
        assert workers and all(w["python"] == sys.executable and str(ROOT) in w["PYTHONPATH"].split(os.pathsep)
                               for w in workers), workers
        code, body = _call(url + "/ksql", {"ksql": f"TERMINATE {query_id};"})
        assert code == 200, body
    finally:
        server.stop(30)
    wait_for(lambda: not (cluster.state() or {}).get("activeapps"), 60, "the SQL server's application to end")


def test_pipeline_survives_a_worker_and_the_driver_killed_mid_batch(spark_standalone: SparkStandalone, kafka: Any,
                                                                     tmp_path: Path) -> None:
    cluster = spark_standalone
    cluster.wait_workers(2)
    source, target = new_topic(kafka, 2, "cl-in"), new_topic(kafka, 2, "cl-out")
    total = 2400
    produce(kafka, source, [(i % 2, b"k%d" % i, b"r%d" % i) for i in range(total)])
    ckpt = tmp_path / "ckpt"

    def driver(*extra: str, log: str) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "spark_integration.examples.pipeline", "--bootstrap-server", kafka.bootstrap,
                "--source", source, "--target", target, "--checkpoint", str(ckpt), "--master", cluster.url,
                "--max-offsets-per-trigger", "200", *extra]
        for k, v in DRIVER_CONF.items():
            args += ["--conf", f"{k}={v}"]
        with (tmp_path / log).open("ab") as out:
            return subprocess.Popen(args, cwd=str(tmp_path), env=_driver_env(), stdout=out, stderr=subprocess.STDOUT)

    def kill_mid_batch(proc: subprocess.Popen[bytes], log: str) -> None:
        """kill -9 the driver while a micro-batch is in flight, after at least one more committed."""
        done = _batches(ckpt, "commits")[-1] if _batches(ckpt, "commits") else -1

        def in_flight() -> bool:
            assert proc.poll() is None, (tmp_path / log).read_text()[-3000:]
            return len(_batches(ckpt, "commits")) > done + 1 and _mid_batch(ckpt, done + 1)
        wait_for(in_flight, 180, "a micro-batch in flight", 0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

    first = driver("--trigger-interval", "0 seconds", log="driver-1.log")
    try:
        def running(n: int) -> bool:
            assert first.poll() is None, (tmp_path / "driver-1.log").read_text()[-3000:]
            return len(_batches(ckpt, "commits")) >= n
        wait_for(lambda: running(2), 240, "two committed micro-batches on the cluster", 0.2)
        # both workers run an executor of the pipeline, whose Python workers are the project's
        workers = _python_workers(cluster)
        assert len(workers) >= 2 and all(w["python"] == sys.executable for w in workers), workers
        assert all(str(ROOT) in w["PYTHONPATH"].split(os.pathsep) for w in workers), workers
        done = _batches(ckpt, "commits")[-1]
        wait_for(lambda: running(0) and _mid_batch(ckpt, done), 60, "a micro-batch in flight", 0.01)
        cluster.kill_worker(cluster.workers[0])                   # kill -9: the worker and its executor
        wait_for(lambda: len(cluster.alive_workers()) == 1, 120, "the master to see the worker gone", 0.25)
        # the running query survives: Spark runs the lost executor's tasks again on the other one
        # (an executor's loss does not count against spark.task.maxFailures); a query that failed
        # and had to be restarted from its checkpoint would not pass here
        wait_for(lambda: running(done + 3), 180, "the running query to go on with the other worker", 0.2)
        kill_mid_batch(first, "driver-1.log")
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
    killed_at = _batches(ckpt, "offsets")[-1]
    assert _batches(ckpt, "commits")[-1] < killed_at < total // 200 - 1, "the driver was killed mid-run"
    wait_for(lambda: not (cluster.state() or {}).get("activeapps"), 60, "the killed driver's application to end")

    second = driver("--available-now", log="driver-2.log")
    try:
        assert second.wait(300) == 0, (tmp_path / "driver-2.log").read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(30)
    assert "pipeline: done" in (tmp_path / "driver-2.log").read_text()
    got = Counter(_read_committed(kafka.bootstrap, target, 2))
    expected = {b"R%d" % i for i in range(total)}
    missing, duplicated = expected - set(got), [v for v, n in got.items() if n > 1]
    assert not missing and not duplicated and set(got) == expected, \
        f"{len(missing)} missing, {len(duplicated)} duplicated, {len(set(got) - expected)} unexpected"
