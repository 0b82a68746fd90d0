"""Brokers in-process: N ``KafkaBroker``s on one memory reactor over one in-memory ZooKeeper.

:class:`InProcessCluster` starts real brokers (real storage in the test's tmp dir, the real
controller, metadata watches, replica fetchers and request handlers) on an
:class:`~tests.support.inprocess_net.InProcessReactor` (Twisted's ``MemoryReactorClock`` with an
in-memory TCP network) and a :class:`~kafkalite.coordination.memory.MemoryZooKeeperServer`,
each broker with its own ZooKeeper session. Nothing runs unless the test pumps:
:meth:`InProcessCluster.pump_until` advances the one simulated clock in small steps until a
condition holds, within a budget of *simulated* time (never a wall-clock sleep), and fails with
what it was waiting for when the budget is spent. So a test of ``replica.lag.time.max.ms`` or a
session expiry costs milliseconds of wall time.

:class:`InProcessClient` speaks the Kafka protocol to one broker over the in-memory network
(``kafkalite.net.client`` and the codec: requests as dicts, responses decoded), as a client
library would.

Blocking work (``BlockingRunner``) goes to a :class:`SteppedRunner`: each job runs in a later
reactor turn, as a worker thread's result would arrive, and a test can hold jobs back to observe
what clients see meanwhile (e.g. COORDINATOR_LOAD_IN_PROGRESS while ``__consumer_offsets`` loads).
The log cleaner is off (``log.cleaner.enable=false``): it is not created, so its
``blockingCallFromThread`` owner call never runs here.

:func:`unstarted_broker` is the kit's other form: one ``KafkaBroker`` built on a ``task.Clock``
and never started, for tests that drive its replica manager, metrics or handlers directly.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

import pytest

from twisted.internet import defer
from twisted.python.failure import Failure

from kafkalite.broker.server import KafkaBroker
from kafkalite.config import BrokerConfig
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperClient, MemoryZooKeeperServer
from kafkalite.net import client as net_client
from kafkalite.protocol import codec
from tests.support.inprocess_net import InProcessReactor

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Small timeouts so that simulated failovers take simulated seconds, not minutes.
INPROCESS_BROKER_DEFAULTS: dict[str, str] = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "replica.socket.timeout.ms": "3000",
    "controller.socket.timeout.ms": "3000",
    "controlled.shutdown.enable": "false",
    "log.cleaner.enable": "false",      # no cleaner: its owner_call would block on the reactor
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}

#: Simulated time a pump may spend before it gives up (well above every timeout above).
DEFAULT_BUDGET_S = 30.0
STEP_S = 0.01


class PumpTimeout(AssertionError):
    """The condition did not hold within the simulated-time budget."""


class SteppedRunner:
    """A ``BlockingRunner`` for the memory reactor: a job runs in a later reactor turn (as a
    worker thread's result would come back), or, while :meth:`hold` is on, waits for
    :meth:`release`."""

    def __init__(self, reactor: InProcessReactor) -> None:
        self.reactor = reactor
        self.holding: Callable[[Callable[..., Any]], bool] | None = None
        self.waiting: list[Callable[[], None]] = []
        self.ran = 0

    def run(self, fn: Callable[..., T], *args: Any) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()

        def job() -> None:
            self.ran += 1
            try:
                result = fn(*args)
            except Exception:  # noqa: BLE001 - handed to the Deferred, as deferToThread does
                d.errback(Failure())
            else:
                d.callback(result)

        if self.holding is not None and self.holding(fn):
            self.waiting.append(job)
        else:
            self.reactor.callLater(0, job)
        return d

    def hold(self, which: Callable[[Callable[..., Any]], bool] = lambda fn: True) -> None:
        """Keep the jobs ``which(fn)`` selects (default: all) waiting until :meth:`release`."""
        self.holding = which

    def release(self) -> None:
        self.holding = None
        jobs, self.waiting = self.waiting, []
        for job in jobs:
            self.reactor.callLater(0, job)


class InProcessClient:
    """A Kafka connection to one broker over the in-memory network; requests are dicts."""

    def __init__(self, cluster: InProcessCluster, proto: net_client.KafkaClientProtocol) -> None:
        self.cluster = cluster
        self.proto = proto

    @property
    def closed(self) -> bool:
        return self.proto.closed

    def send(self, api_key: int, version: int, body: Mapping[str, Any], timeout_s: float = 30.0) -> defer.Deferred:
        """Send a request; the Deferred fires with the decoded response body."""
        return self.proto.request(api_key, version, dict(body), timeout_s)

    def request(self, api_key: int, version: int, body: Mapping[str, Any],
                budget_s: float = DEFAULT_BUDGET_S) -> dict[str, Any]:
        """Send and pump until answered (raises if the connection closes or the budget is spent)."""
        return self.cluster.wait(self.send(api_key, version, body, budget_s + 1), budget_s,
                                 f"a response to API {api_key} v{version}")

    def send_without_response(self, api_key: int, version: int, body: Mapping[str, Any]) -> int:
        """Write a request no answer is expected to (Produce acks=0); returns its correlation id.
        Should the broker answer it anyway, the protocol sees an unknown correlation id and
        closes the connection, which the test then sees."""
        corr = next(self.proto.correlation)
        chunks = codec.encode_request(api_key, version, corr, self.proto.client_id, dict(body))
        transport: Any = self.proto.transport
        transport.writeSequence([c if type(c) is bytes else bytes(c) for c in chunks])
        return corr

    def close(self) -> None:
        self.proto.close()


class InProcessCluster:
    """N brokers on one :class:`InProcessReactor` and one :class:`MemoryZooKeeperServer`."""

    def __init__(self, tmp_path: Path, size: int = 3, overrides: Mapping[str, str] | None = None,
                 log_dirs_per_broker: int = 1, chroot: str = "/kafkalite") -> None:
        self.tmp_path = Path(tmp_path)
        self.size = size
        self.overrides = dict(overrides or {})
        self.log_dirs_per_broker = log_dirs_per_broker
        self.chroot = chroot
        self.reactor = InProcessReactor()
        self.zk_server = MemoryZooKeeperServer(self.reactor)
        self.runner = SteppedRunner(self.reactor)
        self.brokers: dict[int, KafkaBroker] = {}
        self.sessions: dict[int, MemoryZooKeeperClient] = {}
        self.clients: list[InProcessClient] = []
        #: each broker's ``start()`` Deferred (a test may shut a broker down before it fires)
        self.starts: dict[int, defer.Deferred] = {}

    # -- configuration ---------------------------------------------------------------------------
    def log_dirs(self, broker_id: int) -> list[Path]:
        return [self.tmp_path / f"broker-{broker_id}" / f"data-{i}" for i in range(self.log_dirs_per_broker)]

    def config(self, broker_id: int) -> BrokerConfig:
        props = {**INPROCESS_BROKER_DEFAULTS,
                 "offsets.topic.replication.factor": str(min(3, self.size)),
                 **self.overrides,
                 "broker.id": str(broker_id),
                 "zookeeper.connect": f"memory{self.chroot}",
                 "log.dirs": ",".join(str(d) for d in self.log_dirs(broker_id))}
        return BrokerConfig.from_properties(props)

    # -- the clock ------------------------------------------------------------------------------
    def pump_until(self, condition: Callable[[], Any], budget_s: float = DEFAULT_BUDGET_S,
                   what: str = "the condition", step_s: float = STEP_S) -> float:
        """Run the reactor (everything due now, then ``step_s`` of simulated time at a time)
        until ``condition()`` is true; returns the simulated seconds it took. PumpTimeout after
        ``budget_s`` of simulated time."""
        start = self.reactor.seconds()
        deadline = start + budget_s
        while True:
            self.reactor.advance(0)
            if condition():
                return self.reactor.seconds() - start
            if self.reactor.seconds() >= deadline:
                raise PumpTimeout(f"{what} did not happen within {budget_s} s of simulated time")
            self.reactor.advance(step_s)

    def advance(self, seconds: float, step_s: float = STEP_S) -> None:
        """Let ``seconds`` of simulated time pass, in steps (timers fire in order)."""
        end = self.reactor.seconds() + seconds
        while self.reactor.seconds() < end:
            self.reactor.advance(min(step_s, end - self.reactor.seconds()))
        self.reactor.advance(0)

    def wait(self, d: defer.Deferred, budget_s: float = DEFAULT_BUDGET_S, what: str = "a Deferred") -> Any:
        """Pump until ``d`` fires; its result, or its failure raised."""
        box: list[Any] = []
        d.addBoth(box.append)
        self.pump_until(lambda: bool(box), budget_s, what)
        result = box[0]
        if isinstance(result, Failure):
            result.raiseException()
        return result

    # -- brokers --------------------------------------------------------------------------------
    def start_broker(self, broker_id: int, wait: bool = True,
                     prepare: Callable[[KafkaBroker], None] | None = None) -> KafkaBroker:
        """Start (or restart, on the same log dirs) broker ``broker_id`` with a new session;
        ``prepare(broker)`` runs before its ``start()``."""
        assert broker_id not in self.brokers, f"broker {broker_id} is running"
        for d in self.log_dirs(broker_id):
            d.mkdir(parents=True, exist_ok=True)
        config = self.config(broker_id)
        session = self.zk_server.client(f"memory{self.chroot}", config.zookeeper_session_timeout_ms)
        broker = KafkaBroker(config, self.reactor, zk=KafkaZkClient(zk=session), blocking=self.runner)
        self.brokers[broker_id] = broker
        self.sessions[broker_id] = session
        if prepare is not None:
            prepare(broker)
        started = self.starts[broker_id] = broker.start()
        if wait:
            self.wait(started, what=f"broker {broker_id}'s start-up")
        return broker

    def start(self) -> InProcessCluster:
        """Start every broker and wait until each sees all of them and a controller."""
        for b in range(self.size):
            self.start_broker(b, wait=False)
        self.pump_until(self._all_registered, what="every broker registered and a controller elected")
        return self

    def _all_registered(self) -> bool:
        ids = set(self.brokers)
        return all(b.broker_epoch >= 0 and set(b.metadata.brokers) == ids and b.metadata.controller_id in ids
                   for b in self.brokers.values())

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker (its shutdown: listeners, fetchers, ZooKeeper session, logs closed);
        its registration vanishes at once, as a killed broker's does once its session expires."""
        broker = self.brokers.pop(broker_id)
        self.sessions.pop(broker_id)
        self.wait(broker.shutdown(), what=f"broker {broker_id}'s shutdown")

    def shutdown(self) -> None:
        for client in self.clients:
            client.close()
        for broker_id in list(self.brokers):
            self.stop_broker(broker_id)
        self.reactor.advance(0)

    def controller(self) -> KafkaBroker:
        active = [b for b in self.brokers.values() if b.controller.active]
        assert len(active) == 1, f"expected one active controller, found {[b.broker_id for b in active]}"
        return active[0]

    # -- clients and topics ------------------------------------------------------------------------
    def address(self, broker_id: int) -> tuple[str, int]:
        host = self.brokers[broker_id].ports[0].getHost()
        return "127.0.0.1", host.port

    def client(self, broker_id: int, client_id: str = "inprocess-test") -> InProcessClient:
        host, port = self.address(broker_id)
        reactor: Any = self.reactor       # provides IReactorTCP (in memory); zope interfaces are not types
        proto = self.wait(net_client.connect(reactor, host, port, client_id, 5.0),
                          what=f"a connection to broker {broker_id}")
        client = InProcessClient(self, proto)
        self.clients.append(client)
        return client

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: Mapping[str, str] | None = None,
                     assignment: Mapping[int, list[int]] | None = None, via: int | None = None) -> None:
        """CreateTopics v4 through the controller (or ``via``), then wait until every replica has taken its role
        and every ISR is full."""
        topic: dict[str, Any] = {"name": name, "num_partitions": -1 if assignment else partitions,
                                 "replication_factor": -1 if assignment else replication_factor,
                                 "assignments": [{"partition_index": p, "broker_ids": list(r)}
                                                 for p, r in (assignment or {}).items()],
                                 "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        client = self.client(via if via is not None else self.controller().broker_id)
        resp = client.request(19, 4, {"topics": [topic], "timeout_ms": 10000, "validate_only": False})
        client.close()
        code = resp["topics"][0]["error_code"]
        assert code == 0, f"CreateTopics {name}: error {code} {resp['topics'][0].get('error_message')}"
        count = len(assignment) if assignment else partitions
        self.pump_until(lambda: all(self.replicated(name, p) for p in range(count)),
                        what=f"{name}'s replicas in their roles with full ISRs")

    def replicated(self, topic: str, partition: int) -> bool:
        """Every running replica of the partition has its role, and the leader's ISR holds
        every running replica."""
        info = next(iter(self.brokers.values())).metadata.topics.get(topic)
        if info is None or partition not in info.assignment:
            return False
        replicas = [r for r in info.assignment[partition] if r in self.brokers]
        parts = [self.brokers[r].replica_manager.get(topic, partition) for r in replicas]
        if any(p is None or p.state is None for p in parts):
            return False
        leaders = [p for p in parts if p is not None and p.is_leader]
        return len(leaders) == 1 and set(leaders[0].isr) == set(replicas)

    def leader_of(self, topic: str, partition: int) -> int:
        states = {b.metadata.states.get((topic, partition)) for b in self.brokers.values()}
        leaders = {s.leader for s in states if s is not None}
        assert len(leaders) == 1, f"brokers disagree on {topic}-{partition}'s leader: {leaders}"
        return leaders.pop()

    def partition(self, broker_id: int, topic: str, index: int) -> Any:
        part = self.brokers[broker_id].replica_manager.get(topic, index)
        assert part is not None, f"broker {broker_id} holds no replica of {topic}-{index}"
        return part

    # -- followers -------------------------------------------------------------------------------
    def stop_fetching(self, broker_id: int) -> None:
        """The broker's replica fetchers stop (as if its fetcher threads hung)."""
        self.brokers[broker_id].fetchers.shutdown()

    def resume_fetching(self, broker_id: int) -> None:
        """Its fetchers start again for every partition it follows."""
        broker = self.brokers[broker_id]
        broker.fetchers.closed = False
        for part in broker.replica_manager.partitions.values():
            if part.state is not None and not part.is_leader:
                broker.fetchers.follow(part, part.state.leader)


def unstarted_broker(log_dir: Path, clock: Any = None, broker_id: int = 1,
                     overrides: Mapping[str, str] | None = None) -> KafkaBroker:
    """One real ``KafkaBroker``, built but not started, for a test that drives its parts (replica
    manager, metrics, handlers) directly: storage in ``log_dir``, an in-memory ZooKeeper session
    that is never opened, ``clock`` (a ``task.Clock`` unless given) and an ``InlineRunner``. The
    test fills its metadata cache and partition states itself; it closes ``broker.log_manager``.
    A test that needs brokers that talk (start-up, controller, fetchers) uses
    :class:`InProcessCluster`."""
    from twisted.internet import task
    from kafkalite.broker.services import InlineRunner

    clock = clock if clock is not None else task.Clock()
    config = BrokerConfig.from_properties({"broker.id": str(broker_id), "zookeeper.connect": "memory",
                                           "log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
                                           **(overrides or {})})
    zk = KafkaZkClient(zk=MemoryZooKeeperServer(clock).client("memory"))
    return KafkaBroker(config, clock, zk=zk, blocking=InlineRunner())


def records(values: list[bytes], ts: int = 1000) -> bytes:
    """One record batch (v2) holding ``values``."""
    from kafkalite.records.builder import build_batch
    return bytes(build_batch([(ts, None, v, ()) for v in values]))


def produce_body(topic: str, partition_records: Mapping[int, bytes], acks: int,
                 timeout_ms: int = 5000) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": r}
                                                              for p, r in partition_records.items()]}]}


@pytest.fixture
def inprocess_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., InProcessCluster]]:
    """``factory(size=3, overrides=None, log_dirs_per_broker=1)`` -> a started InProcessCluster;
    every cluster is shut down (brokers stopped, logs closed) after the test."""
    made: list[InProcessCluster] = []

    def factory(size: int = 3, overrides: Mapping[str, str] | None = None,
                log_dirs_per_broker: int = 1) -> InProcessCluster:
        cluster = InProcessCluster(tmp_path / f"cluster-{len(made)}", size, overrides, log_dirs_per_broker)
        made.append(cluster)
        return cluster.start()

    yield factory
    for cluster in made:
        cluster.shutdown()


__all__ = ["inprocess_cluster_factory", "InProcessCluster", "InProcessClient", "SteppedRunner", "PumpTimeout",
           "INPROCESS_BROKER_DEFAULTS", "unstarted_broker", "records", "produce_body"]
