"""The broker's metrics, named as Kafka's JMX metrics come out of the Prometheus JMX exporter.

Two kinds, kept apart so the request path stays cheap:

* :class:`BrokerMetrics` holds what only the hot path can count: bytes and messages in per topic
  (one increment per produced partition, never per record: the message count is the offsets the
  append assigned), bytes out per topic (one per fetched partition), requests and their latency
  per API (one per request), ISR shrinks and expands. Plain ints in dicts, touched only on the
  reactor thread, so there is no lock on the request path.
* :class:`BrokerCollector` computes every gauge at scrape time from the services themselves
  (replica manager, controller, metadata, group coordinator, log manager): nothing is updated when
  state changes, so a gauge can never drift from the state it describes.

Names follow the JMX exporter's common Kafka rules (``lowercaseOutputName``): an MBean
``kafka.<domain><type=T, name=N, k=v>`` becomes ``kafka_<domain>_<t>_<n>`` with ``k`` as a label;
a gauge's ``Value`` is a gauge, a meter's ``Count`` a counter rendered with ``_total``, e.g.
``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=t>`` ->
``kafka_server_brokertopicmetrics_bytesinpersec_total{topic="t"}`` and
``kafka.network<type=RequestMetrics, name=RequestsPerSec, request=Produce, version=8>`` ->
``kafka_network_requestmetrics_requests_total{request="Produce",version="8"}``. Kafka's request
latency histogram (``TotalTimeMs``, which the exporter can only show as percentiles) is a real
Prometheus histogram here, ``kafka_network_requestmetrics_totaltimems`` in milliseconds: from
the request's dispatch to its response being ready (our one-in-flight pipeline has no separate
queue or send stage to report). Per-topic meters carry a ``topic`` label only (Kafka's all-topics
MBean is their sum).

Everything runs on the reactor thread: the collector is called by the /metrics resource's
synchronous render, so it reads the services without locks; its cost is one pass over the hosted
partitions and groups per scrape.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kafkalite.group.state import GroupState
from kafkalite.protocol import codec

if TYPE_CHECKING:
    from kafkalite.broker.fetch_session import FetchSessionCache
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.controller.controller import Controller
    from kafkalite.group.coordinator import GroupCoordinator
    from kafkalite.metadata import MetadataCache
    from kafkalite.storage import LogManager

#: Upper bounds (ms) of the request-latency buckets: sub-millisecond answers up to long polls and
#: acks=all waits at the default request timeouts.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


def api_name(api_key: int) -> str:
    """Kafka's request tag value (``ApiKeys.name``, e.g. Produce, FetchConsumer is not split)."""
    name = codec.API_KEYS.get(api_key)
    return str(name) if name is not None else str(api_key)


class LatencyHistogram:
    """Bucket counts (not cumulative) and the sum, in milliseconds."""

    __slots__ = ("counts", "total_ms")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)     # the last one is +Inf
        self.total_ms = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.total_ms += ms

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs as Prometheus wants them."""
        out, running = [], 0
        for bound, count in zip((*LATENCY_BUCKETS_MS, float("inf")), self.counts):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class BrokerMetrics:
    """Counters only the request path can know; reactor thread only (no locks)."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out: dict[str, int] = {}
        self.produce_requests: dict[str, int] = {}
        self.fetch_requests: dict[str, int] = {}
        self.failed_produce_requests: dict[str, int] = {}
        self.failed_fetch_requests: dict[str, int] = {}
        self.requests: dict[tuple[int, int], int] = {}          # (api key, version) -> count
        self.latency: dict[int, LatencyHistogram] = {}          # api key -> histogram
        self.reactor_delay = LatencyHistogram()   # timer lateness on the reactor (reactor_delay.py)
        self.isr_shrinks = 0
        self.isr_expands = 0

    @staticmethod
    def _add(table: dict[str, int], topic: str, n: int) -> None:
        table[topic] = table.get(topic, 0) + n

    def produced(self, topic: str, nbytes: int, messages: int) -> None:
        """One partition's append (all its batches)."""
        self._add(self.bytes_in, topic, nbytes)
        self._add(self.messages_in, topic, messages)
        self._add(self.produce_requests, topic, 1)

    def produce_failed(self, topic: str) -> None:
        self._add(self.failed_produce_requests, topic, 1)

    def fetched(self, topic: str, nbytes: int, follower: bool) -> None:
        """One partition's share of a Fetch response. Follower fetches count as replication
        bytes, not BytesOut, as in Kafka."""
        self._add(self.replication_bytes_out if follower else self.bytes_out, topic, nbytes)
        if not follower:
            self._add(self.fetch_requests, topic, 1)

    def fetch_failed(self, topic: str) -> None:
        self._add(self.failed_fetch_requests, topic, 1)

    def request_done(self, api_key: int, version: int, elapsed_ms: float) -> None:
        key = (api_key, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        hist = self.latency.get(api_key)
        if hist is None:
            hist = self.latency[api_key] = LatencyHistogram()
        hist.observe(elapsed_ms)

    def isr_changed(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """A leader's ISR write succeeded (Kafka counts IsrShrinks/IsrExpands there too)."""
        if len(after) < len(before):
            self.isr_shrinks += 1
        elif len(after) > len(before):
            self.isr_expands += 1


@dataclass
class MetricsSources:
    """The services whose state the gauges describe (read at scrape time)."""

    broker_id: Callable[[], int]
    metrics: BrokerMetrics
    replicas: "ReplicaManager"
    controller: "Controller"
    metadata: "MetadataCache"
    groups: Callable[[], "GroupCoordinator"]
    logs: "LogManager"
    #: (listener, (client software name, version) or None) of every open client connection
    connections: Callable[[], Iterable[tuple[str, tuple[str, str] | None]]] = lambda: ()
    #: KIP-227 fetch sessions (None: the broker keeps none)
    fetch_sessions: "FetchSessionCache | None" = None


def _counter(name: str, doc: str, label: str | None, table: dict[str, int]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=[label] if label else None)
    for key in sorted(table):
        fam.add_metric([key], table[key])
    return fam


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class BrokerCollector(Collector):
    """Renders :class:`BrokerMetrics` and computes the gauges from the services."""

    def __init__(self, sources: MetricsSources) -> None:
        self.s = sources

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_meters()
        yield from self._requests()
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._logs()
        yield from self._groups()
        yield from self._connections()
        yield from self._fetch_sessions()

    def _fetch_sessions(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache metrics (NumIncrementalFetchSessions, ...Partitions Cached,
        IncrementalFetchSessionEvictionsPerSec as a counter), read at scrape time."""
        cache = self.s.fetch_sessions
        if cache is None:
            return
        prefix = "kafka_server_fetchsessioncache_"
        yield _gauge(prefix + "numincrementalfetchsessions", "Fetch sessions kept (KIP-227)", len(cache))
        yield _gauge(prefix + "numincrementalfetchpartitionscached", "Partitions in all fetch sessions",
                     cache.num_partitions())
        yield CounterMetricFamily(prefix + "incrementalfetchsessionevictionspersec",
                                  "Fetch sessions evicted for a new one", value=cache.evictions)

    def _connections(self) -> Iterator[Metric]:
        """Kafka's socket-server ``connections`` gauge per listener and client software (KIP-511:
        what ApiVersions v3 named; "unknown" before that or for older clients)."""
        counts: dict[tuple[str, str, str], int] = {}
        for listener, software in self.s.connections():
            name, version = software or ("unknown", "unknown")
            counts[(listener, name, version)] = counts.get((listener, name, version), 0) + 1
        fam = GaugeMetricFamily("kafka_server_socket_server_metrics_connections",
                                "Open connections per listener and client software (KIP-511)",
                                labels=["listener", "client_software_name", "client_software_version"])
        for labels in sorted(counts):
            fam.add_metric(list(labels), counts[labels])
        yield fam

    def _topic_meters(self) -> Iterator[Metric]:
        m = self.s.metrics
        prefix = "kafka_server_brokertopicmetrics_"
        yield _counter(prefix + "bytesinpersec", "Bytes appended by producers (BytesInPerSec)", "topic", m.bytes_in)
        yield _counter(prefix + "messagesinpersec", "Records appended by producers (MessagesInPerSec)", "topic",
                       m.messages_in)
        yield _counter(prefix + "bytesoutpersec", "Bytes sent to consumers (BytesOutPerSec)", "topic", m.bytes_out)
        yield _counter(prefix + "replicationbytesoutpersec", "Bytes sent to followers (ReplicationBytesOutPerSec)",
                       "topic", m.replication_bytes_out)
        yield _counter(prefix + "totalproducerequestspersec", "Produce requests per partition (TotalProduceRequestsPerSec)",
                       "topic", m.produce_requests)
        yield _counter(prefix + "totalfetchrequestspersec", "Consumer fetches per partition (TotalFetchRequestsPerSec)",
                       "topic", m.fetch_requests)
        yield _counter(prefix + "failedproducerequestspersec", "Refused produce partitions (FailedProduceRequestsPerSec)",
                       "topic", m.failed_produce_requests)
        yield _counter(prefix + "failedfetchrequestspersec", "Refused fetch partitions (FailedFetchRequestsPerSec)",
                       "topic", m.failed_fetch_requests)

    def _requests(self) -> Iterator[Metric]:
        m = self.s.metrics
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests served (RequestsPerSec)",
                                       labels=["request", "version"])
        for (key, version), n in sorted(m.requests.items()):
            requests.add_metric([api_name(key), str(version)], n)
        yield requests
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Request time in ms, dispatch to response (TotalTimeMs)", labels=["request"])
        for key, hist in sorted(m.latency.items()):
            latency.add_metric([api_name(key)], hist.buckets(), hist.total_ms)
        yield latency
        delay = HistogramMetricFamily("kafkalite_reactor_timer_delay_ms",
                                      "How late the reactor ran a 100 ms timer: the longest a request arriving "
                                      "then could have waited before being read")
        delay.add_metric([], m.reactor_delay.buckets(), m.reactor_delay.total_ms)
        yield delay

    def _replica_manager(self) -> Iterator[Metric]:
        parts = list(self.s.replicas.partitions.values())
        leaders = [p for p in parts if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        under_min_isr = 0
        for p in leaders:
            if len(p.isr) < self.s.replicas.topic_configs.effective(p.topic)["min.insync.replicas"]:
                under_min_isr += 1
        prefix = "kafka_server_replicamanager_"
        yield _gauge(prefix + "underreplicatedpartitions", "Partitions led here with an ISR smaller than their replicas",
                     under)
        yield _gauge(prefix + "underminisrpartitioncount", "Partitions led here with an ISR below min.insync.replicas",
                     under_min_isr)
        yield _gauge(prefix + "partitioncount", "Partitions with a replica on this broker", len(parts))
        yield _gauge(prefix + "leadercount", "Partitions led by this broker", len(leaders))
        yield _gauge(prefix + "offlinereplicacount", "Replicas here whose log dir is offline",
                     len(self.s.logs.offline_partitions()))
        yield CounterMetricFamily(prefix + "isrshrinkspersec", "ISR shrinks written by this broker (IsrShrinksPerSec)",
                                  value=self.s.metrics.isr_shrinks)
        yield CounterMetricFamily(prefix + "isrexpandspersec", "ISR expansions written by this broker (IsrExpandsPerSec)",
                                  value=self.s.metrics.isr_expands)

    def _controller(self) -> Iterator[Metric]:
        """Kafka reports these on the active controller only (0 elsewhere)."""
        active = self.s.controller.active
        offline = topics = partitions = 0
        if active:
            live = set(self.s.metadata.brokers) | {self.s.broker_id()}
            states = self.s.metadata.states          # what ZooKeeper says (read only: no side effects)
            for topic, info in self.s.metadata.topics.items():
                topics += 1
                for p in info.assignment:
                    partitions += 1
                    state = states.get((topic, p))
                    if state is None or state.leader < 0 or state.leader not in live:
                        offline += 1
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount", "1 on the active controller", 1 if active else 0)
        yield _gauge(prefix + "offlinepartitionscount", "Partitions without a live leader (controller only)", offline)
        yield _gauge(prefix + "globaltopiccount", "Topics in the cluster (controller only)", topics)
        yield _gauge(prefix + "globalpartitioncount", "Partitions in the cluster (controller only)", partitions)

    def _logs(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=["topic", "partition"])
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log",
                                     labels=["topic", "partition"])
        for (topic, p), plog in sorted(self.s.logs.logs().items()):
            labels = [topic, str(p)]
            size.add_metric(labels, plog.size)
            start.add_metric(labels, plog.log_start_offset)
            end.add_metric(labels, plog.log_end_offset)
            segments.add_metric(labels, len(plog.segments))
        yield from (size, start, end, segments)
        yield _gauge("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs offline after an I/O error",
                     len(self.s.logs.offline_dirs))

    def _groups(self) -> Iterator[Metric]:
        groups = list(self.s.groups().groups.values())
        by_state = {state: 0 for state in GroupState}
        offsets = 0
        for g in groups:
            by_state[g.state] += 1
            offsets += len(g.offsets)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(prefix + "numgroups", "Groups this broker coordinates", len(groups))
        for state, suffix in ((GroupState.STABLE, "stable"), (GroupState.PREPARING_REBALANCE, "preparingrebalance"),
                              (GroupState.COMPLETING_REBALANCE, "completingrebalance"),
                              (GroupState.EMPTY, "empty"), (GroupState.DEAD, "dead")):
            yield _gauge(prefix + "numgroups" + suffix, f"Groups in state {state.value}", by_state[state])
        yield _gauge(prefix + "numoffsets", "Committed offsets held for those groups", offsets)


def registry_for(sources: MetricsSources) -> CollectorRegistry:
    """A registry of this broker's own (several brokers may share a process in tests)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(sources))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition (format 0.0.4)."""
    from prometheus_client.exposition import generate_latest
    return generate_latest(registry)

