"""One local[2] SparkSession, one kafkalite broker and one schema registry for every Spark test
(pyspark reference §10).

A SparkSession costs ~1 GB and ~6-12 s to start, so it is session-scoped and all Spark tests run
in one pytest process (one xdist group: tests/conftest.py). The environment is set before the JVM
starts: workers must run this venv's interpreter (P2) and import this tree's packages (P3).
"""
from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.brokers import Cluster

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent.parent


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["TZ"] = "UTC"
    from pyspark.sql import SparkSession

    from spark_integration import register
    from spark_integration.session import DRIVER_JAVA_OPTIONS

    session = (SparkSession.builder.master("local[2]").appName("kafkalite-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               # the SQL server's thread stack: a query stopped mid-batch ends cleanly (session.py)
               .config("spark.driver.defaultJavaOptions", DRIVER_JAVA_OPTIONS)
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile=file:{_HERE / 'log4j2.properties'}")
               .getOrCreate())
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def kafka(zookeeper: Any, tmp_path_factory: Any) -> Iterator[Cluster]:
    """One broker for the whole Spark run; every test uses its own topics."""
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("spark-kafka"), 1,
                      {"num.partitions": "1", "log.retention.check.interval.ms": "500"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def schema_registry(kafka: Cluster, tmp_path_factory: Any) -> Iterator[Any]:
    """One ``kafkalite-schema-registry`` on the Spark tests' broker, ready for writes; every test
    uses its own subjects."""
    from kafkalite.cluster.processes import SchemaRegistryProcess

    registry = SchemaRegistryProcess(tmp_path_factory.mktemp("spark-registry"), kafka.bootstrap)
    registry.launch()
    try:
        registry.wait_ready(60, need_primary=True)
        yield registry
    finally:
        registry.stop(10)


def sql_config(bootstrap: str, service_id: str, state_dir: Any, **overrides: Any) -> Any:
    """A SQL server's configuration for one test: its own ``ksql.service.id`` (so its own command
    topic), queries reading from the earliest offset and committing every 500 ms, and a restart
    back-off of 1 s doubling to 4 s where ksqlDB's default starts at 15 s: a query failing at start
    on a loaded machine (a Python worker that did not connect back in time) runs again well inside
    a test's wait instead of after 15 + 30 + 60 s."""
    from kafkalite.sql.config import KsqlConfig

    settings: dict[str, Any] = {"streams": (("auto.offset.reset", "earliest"), ("commit.interval.ms", "500")),
                                "retry_backoff_initial_ms": 1000, "retry_backoff_max_ms": 4000, **overrides}
    return KsqlConfig(bootstrap_servers=bootstrap, service_id=service_id, state_dir=str(state_dir), **settings)


@contextlib.contextmanager
def running_engine(spark: Any, config: Any) -> Iterator[Any]:
    """A SQL engine on the shared session with ``config`` (:func:`sql_config`): started (its command
    topic replayed) for the ``with`` block, stopped after it."""
    from kafkalite.sql.engine import Engine

    e = Engine(config, spark)
    e.start()
    try:
        yield e
    finally:
        e.stop()


def engine_wait(engine: Any, what: str) -> Callable[[], str]:
    """A wait's message naming ``what`` and, asked when the wait runs out, the SQL engine's
    persistent queries with their state and last error and how often each was restarted."""
    def describe() -> str:
        queries = {q.id: (q.state, q.error) for q in engine.metastore.queries.values()}
        return f"{what} (queries {queries}, restarts {engine.restarts})"
    return describe


def new_topic(cluster: Cluster, partitions: int, prefix: str = "t", config: dict[str, str] | None = None) -> str:
    """Create a topic and wait until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    futures[name].result(60)
    from kafkalite.client import KafkaClient
    from tests.support.waiting import wait_for

    with KafkaClient(cluster.bootstrap) as client:
        def ready() -> bool:
            md = client.metadata([name])
            t = md.topics.get(name)
            return t is not None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values())
        wait_for(ready, 60, f"leaders for {name}")
    return name


def produce(cluster: Cluster, topic: str, records: Any, **config: Any) -> int:
    """Produce ``(partition, key, value[, headers])`` tuples fast (big batches, acks=1)."""
    from confluent_kafka import Producer

    producer = Producer({**{"bootstrap.servers": cluster.bootstrap, "linger.ms": 50, "batch.size": 1000000,
                         "batch.num.messages": 100000, "queue.buffering.max.messages": 2000000,
                         "queue.buffering.max.kbytes": 1048576, "acks": 1, "compression.type": "none",
                         "enable.idempotence": False}, **config})
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    n = 0
    for rec in records:
        partition, key, value = rec[0], rec[1], rec[2]
        headers = rec[3] if len(rec) > 3 else None
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
    remaining = producer.flush(120)
    assert remaining == 0 and not failures, f"{remaining} undelivered, errors: {failures[:3]}"
    return n
