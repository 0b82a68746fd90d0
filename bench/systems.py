"""The two systems under test behind one interface: a cluster of N brokers in its own ZooKeeper
chroot, the client configuration to reach it, topic creation, and per-broker process control.

kafkalite brokers are :class:`bench.broker.BenchBroker` processes in ``tests.support.brokers``
clusters (the same launcher the test suite and ``kafkalite-cluster`` use); Kafka 0.9.0.1 brokers
are :class:`bench.kafka09.Kafka09Broker` JVMs. The client settings differ only in the version
fallback Kafka 0.9 needs (:data:`bench.kafka09.CLIENT_CONF`).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench import kafka09
from bench.cpu import PhaseCpu, pids_of
from tests.support.brokers import BrokerProcess, Cluster

KAFKALITE = "kafkalite"
KAFKA = f"Kafka {kafka09.KAFKA_VERSION}"

# librdkafka logs every refused reconnect while a broker is down (failover scenario): keep its log
# out of the table; errors still reach the harness through error_cb / delivery reports.
_rdkafka_log = logging.getLogger("bench.rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())
_rdkafka_log.propagate = False


class System:
    name: str
    #: the Produce version the raw-request load generator sends (bench/ceiling_load.py)
    raw_produce_version: int = 7

    def __init__(self, zookeeper: Any, workdir: Path) -> None:
        self.zookeeper = zookeeper
        self.workdir = workdir
        self.cluster: Cluster | None = None
        self._n = 0

    # ----------------------------------------------------------------------- cluster lifecycle

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        raise NotImplementedError

    def start(self, size: int) -> Cluster:
        """Start ``size`` brokers (ids 1..size) in a fresh chroot and data directory."""
        self.stop()
        self._n += 1
        cluster = Cluster(self.zookeeper, self.workdir / f"cluster-{self._n}", 0)
        cluster.brokers = [self._make_broker(cluster, i) for i in range(1, size + 1)]
        cluster.check_full_view = not isinstance(self, Kafka09)
        self.cluster = cluster
        cluster.start()
        return cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    @property
    def brokers(self) -> list[BrokerProcess]:
        assert self.cluster is not None
        return self.cluster.brokers

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def broker_cpu(self) -> PhaseCpu:
        """A ``with`` block's CPU time of every broker process of the cluster (kafkalite's Python
        processes, Kafka's JVMs) and their descendants, read from ``/proc`` at its start and end."""
        return PhaseCpu(pids_of(self.brokers))

    # ----------------------------------------------------------------------- clients

    def client_conf(self, **extra: Any) -> dict[str, Any]:
        """Base configuration for every client: bootstrap, quiet logger, plus ``extra``."""
        assert self.cluster is not None
        conf: dict[str, Any] = {"bootstrap.servers": ",".join(b.bootstrap for b in self.brokers if b.alive),
                                "logger": _rdkafka_log}
        conf.update(extra)
        return conf

    def admin(self) -> AdminClient:
        return AdminClient(self.client_conf())

    # ----------------------------------------------------------------------- topics

    def create_topic(self, topic: str, partitions: int, replication: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def wait_topic(self, topic: str, partitions: int, full_isr: int = 1, timeout: float = 60.0) -> None:
        """Until metadata shows a leader for every partition and at least ``full_isr`` in-sync replicas."""
        admin = self.admin()
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(topic, timeout=5).topics.get(topic)
            except Exception as exc:     # broker just restarted / metadata not there yet
                last = exc
                md = None
            if md is not None and md.error is None and len(md.partitions) == partitions and all(
                    p.leader >= 0 and p.error is None and len(p.isrs) >= full_isr for p in md.partitions.values()):
                return
            last = md.error if md is not None else last
            time.sleep(0.1)
        raise TimeoutError(f"{self.name}: topic {topic} not ready ({partitions} partitions, "
                           f"ISR >= {full_isr}) after {timeout} s: {last}")

    def leader(self, topic: str, partition: int = 0) -> int:
        md = self.admin().list_topics(topic, timeout=10).topics[topic]
        return md.partitions[partition].leader


class Kafkalite(System):
    name = KAFKALITE

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        from bench.broker import BenchBroker    # cProfile-capable subclass, long start timeout
        return BenchBroker(cluster, broker_id, {})

    def create_topic(self, topic: str, partitions: int, replication: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        admin = self.admin()       # must outlive the future: destroying it fails the request
        fut = admin.create_topics([NewTopic(topic, partitions, replication, config=configs or {})],
                                  operation_timeout=30)[topic]
        fut.result(60)
        self.wait_topic(topic, partitions, replication)



class MeteredKafkalite(Kafkalite):
    """kafkalite whose brokers serve /metrics on a free port each (scenario 15 reads their
    request counters and points the console's charts at them)."""

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        from bench.broker import BenchBroker
        from kafkalite.cluster.processes import free_port
        return BenchBroker(cluster, broker_id, {}, metrics_port=free_port())

class SingleBrokerKafkalite(Kafkalite):
    """kafkalite whose internal topics fit one broker (``offsets.topic.replication.factor=1``, as
    Kafka's quickstart server.properties has it): scenario 16's Connect sinks join consumer groups
    on a 1-broker cluster, and the default RF 3 would leave __consumer_offsets uncreatable."""

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        from bench.broker import BenchBroker
        return BenchBroker(cluster, broker_id, {"offsets.topic.replication.factor": "1",
                                                "transaction.state.log.replication.factor": "1",
                                                "transaction.state.log.min.isr": "1"})


class Kafka09(System):
    name = KAFKA
    raw_produce_version = 1      # v0 message sets: the newest 0.9 understands

    def __init__(self, zookeeper: Any, workdir: Path) -> None:
        super().__init__(zookeeper, workdir)
        self.home = kafka09.kafka_home()

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        return kafka09.Kafka09Broker(cluster, broker_id, {}, self.home)

    def client_conf(self, **extra: Any) -> dict[str, Any]:
        return super().client_conf(**kafka09.CLIENT_CONF, **extra)

    def create_topic(self, topic: str, partitions: int, replication: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        assert self.cluster is not None
        kafka09.create_topic_in_zookeeper(self.cluster, topic, partitions, replication, configs)
        self.wait_topic(topic, partitions, replication)


class SecureKafkalite(Kafkalite):
    """kafkalite with PLAINTEXT, SSL and SASL_SSL listeners (the test PKI, SCRAM users); clients
    use ``protocol`` (PLAINTEXT or SASL_SSL with SCRAM-SHA-512), so the same load runs over both."""

    name = KAFKALITE

    def __init__(self, zookeeper: Any, workdir: Path) -> None:
        super().__init__(zookeeper, workdir)
        from tests.support.security import make_pki
        self.pki = make_pki(workdir / "pki")
        self.protocol = "PLAINTEXT"

    def _make_broker(self, cluster: Cluster, broker_id: int) -> BrokerProcess:
        from bench.broker import BenchBroker
        from tests.support.security import secure_overrides
        return BenchBroker(cluster, broker_id, secure_overrides(self.pki))

    def client_conf(self, **extra: Any) -> dict[str, Any]:
        conf = super().client_conf(**extra)
        if self.protocol == "SASL_SSL":
            from tests.support.security import ADMIN_PASSWORD, ADMIN_USER, listener_port
            conf.update({"bootstrap.servers": ",".join(f"127.0.0.1:{listener_port(b, 'SASL_SSL')}"
                                                       for b in self.brokers if b.alive),
                         "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": ADMIN_USER, "sasl.password": ADMIN_PASSWORD,
                         "ssl.ca.location": str(self.pki.ca)})
        return conf
