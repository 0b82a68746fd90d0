"""Broker processes for tests: the package launcher's, with the tests' settings.

:class:`Cluster` is a :class:`kafkalite.cluster.local.LocalCluster` on the session's shared
ZooKeeper, in a ZooKeeper chroot and data directory of its own; its brokers are real
``kafkalite-server`` processes (:class:`kafkalite.cluster.processes.BrokerProcess`). A broker
counts as started when its ephemeral ``/brokers/ids/<id>`` znode, written by this incarnation,
exists and a controller is elected: the broker registers only after its logs are loaded and its
listener is bound, so that is Kafka's own readiness signal. Ports are chosen by the broker
(``listeners=PLAINTEXT://127.0.0.1:0``) and read back from the registration.

A cluster given no shared ZooKeeper (``zookeeper=None``) owns a ZooKeeper ensemble of its own
(``zookeepers`` servers, tickTime 500), started before its brokers and stopped after them, whose
servers the ZooKeeper fault tests kill and restart (:func:`ensemble_cluster_factory`). Its state
file (``cluster.json``) lets ``kafkalite-cluster status --data-dir`` report on it.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cluster import processes
from kafkalite.cluster.local import LocalCluster
from tests.support.zookeeper import TEST_TICK_MS

#: What every test broker runs with unless a test overrides it (on top of the launcher's own
#: ``zookeeper.session.timeout.ms=6000``).
TEST_BROKER_DEFAULTS = {
    # a whole-cluster stop leaves the last brokers nowhere to move leaderships: keep its
    # controlled-shutdown retries short (Kafka default 5000 ms)
    "controlled.shutdown.retry.backoff.ms": "200",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerProcess(processes.BrokerProcess):
    """A broker with :data:`TEST_BROKER_DEFAULTS` under its own ``overrides``."""

    def properties(self) -> dict[str, str]:
        return {**super().properties(), **TEST_BROKER_DEFAULTS, **self.overrides}


class Cluster(LocalCluster):
    """N brokers (ids ``first_id``..) in one ZooKeeper chroot of the shared ``zookeeper``, or of
    an ensemble of ``zookeepers`` servers of its own when ``zookeeper`` is None.

    Each broker keeps its port across restarts, as a real cluster's do (``free_port`` chooses it
    outside the kernel's ephemeral range, so no outgoing connection takes it while the broker is
    down). With a new port at every start, librdkafka's transaction coordinator connection kept
    dialling a restarted coordinator's old address for minutes (test_eos_workers timed out).

    ``start`` starts its own ZooKeeper (if any), then the brokers one after another (so the first
    one becomes the controller); ``stop()`` always leaves no broker process behind, stops its own
    ZooKeeper servers and never the shared one.
    """

    broker_class = BrokerProcess

    def __init__(self, zookeeper: processes.ZooKeeperProcess | None, workdir: Path, size: int = 1,
                 overrides: dict[str, str] | None = None, first_id: int = 1, zookeepers: int = 3,
                 broker_overrides: dict[int, dict[str, str]] | None = None, metrics: bool = False) -> None:
        """``broker_overrides`` (broker id -> properties) apply to that broker only, on top of
        ``overrides`` (e.g. its own ``log.dirs``); ``metrics``: each broker serves /metrics and
        /health on a free port."""
        super().__init__(workdir, size, first_id, overrides=overrides, zookeeper=zookeeper,
                         chroot=f"/kafkalite-test-{uuid.uuid4().hex[:10]}",
                         zookeepers=zookeepers, zookeeper_tick_ms=TEST_TICK_MS, metrics=metrics)
        for b in self.brokers:
            b.overrides.update((broker_overrides or {}).get(b.broker_id, {}))

    def default_overrides(self) -> dict[str, str]:
        return {}           # the brokers bring the tests' defaults (BrokerProcess.properties)

    def start(self) -> "Cluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self.start_zookeeper()
            for b in self.brokers:
                b.start()
            self.save_state()
            self.wait_for_full_view()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.down(20)


@pytest.fixture
def cluster_factory(zookeeper: Any, tmp_path: Path) -> Any:
    """``make(size=1, overrides, broker_overrides={id: {...}}, metrics=False)`` starts a cluster in
    its own chroot (``metrics``: each broker serves /metrics and /health on a free port); all are
    stopped after the test."""
    made: list[Cluster] = []

    def make(size: int = 1, overrides: dict[str, str] | None = None,
             broker_overrides: dict[int, dict[str, str]] | None = None, metrics: bool = False) -> Cluster:
        cluster = Cluster(zookeeper, tmp_path / f"cluster-{len(made)}", size, overrides,
                          broker_overrides=broker_overrides, metrics=metrics)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def ensemble_cluster_factory(tmp_path: Path) -> Any:
    """``make(size=3, overrides, zookeepers=3)`` starts a cluster on a ZooKeeper ensemble of its own;
    brokers and ZooKeeper servers are all stopped after the test."""
    made: list[Cluster] = []

    def make(size: int = 3, overrides: dict[str, str] | None = None, zookeepers: int = 3) -> Cluster:
        cluster = Cluster(None, tmp_path / f"ensemble-cluster-{len(made)}", size, overrides, zookeepers=zookeepers)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture(scope="module")
def broker(zookeeper: Any, tmp_path_factory: Any) -> Any:
    """One broker shared by a test module (each test should use its own topic names)."""
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("broker"), 1).start()
    yield cluster.brokers[0]
    cluster.stop()
