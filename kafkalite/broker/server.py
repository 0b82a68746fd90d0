"""The broker: wires configuration, storage, ZooKeeper, the controller and the listeners.

Start-up follows Kafka's order: logs are recovered before anything else (blocking, before the
reactor runs: there is nothing to serve yet), then ZooKeeper is connected, the listeners are
bound, and only then is ``/brokers/ids/<id>`` registered, so a registered broker always serves.
Shutdown reverses it: first, with ``controlled.shutdown.enable``, the broker stops following
and asks the controller to move its leaderships away while it still serves (Kafka's
ControlledShutdown); then it stops accepting, answers waiting requests, closes the ZooKeeper
session (our ephemeral registration vanishes at once), flushes and closes the logs with a
clean-shutdown marker.
"""
from __future__ import annotations

import logging
import socket
import time
from typing import Any

from twisted.internet import defer, task, threads
from twisted.internet.interfaces import IReactorCore

from kafkalite.broker import registry
from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.dispatcher import Dispatcher
from kafkalite.broker.metadata_cache import METADATA_CHANGED, MetadataCache
from kafkalite.broker.metadata_sync import Change, MetadataSync
from kafkalite.broker.producer_ids import ProducerIdManager
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.partition import PartitionState
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.config import BrokerConfig, Endpoint, render
from kafkalite.controller.controller import Controller
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.ops import Updated
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.group.offsets_topic import OffsetsTopic
from kafkalite.net import client as net_client
from kafkalite.net.server import KafkaServerFactory
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.replication.fetcher import ReplicaFetcherManager
from kafkalite.storage import LogConfig, LogManager
from kafkalite.storage.cleaner import LogCleaner
from zk_schema import paths
from zk_schema.brokers import BrokerRegistration, EndPoint
from zk_schema.topics import PartitionState as StateZNode

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class KafkaBroker:
    def __init__(self, config: BrokerConfig, reactor: Any) -> None:
        self.config = config
        self.reactor = reactor
        self.broker_id = config.broker_id
        self.metadata = MetadataCache()
        self.purgatory = Purgatory(reactor)
        self._topic_configs: dict[str, tuple[dict[str, str], dict[str, Any], Any]] = {}
        started = time.monotonic()
        self.log_manager = LogManager(config.log_dirs, self.log_config(None))
        log.info("loaded %d partition log(s) in %.2f s", len(self.log_manager.logs()),
                 time.monotonic() - started)
        self.cleaner: LogCleaner | None = None
        if config["log.cleaner.enable"] and config["log.cleaner.threads"] > 0:
            # cleaner passes run in worker threads; their one mutation, the segment swap, runs on
            # the reactor (the logs' owner thread) through blockingCallFromThread
            self.cleaner = LogCleaner(self.log_manager, dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
                                      threads=config["log.cleaner.threads"], clock=now_ms,
                                      owner_call=lambda fn: threads.blockingCallFromThread(reactor, fn))
        self.replica_manager = ReplicaManager(self.broker_id, config, self.log_manager, self.purgatory,
                                              self.topic_config, now_ms, self.metadata.partition_exists)
        self.admin = TopicAdmin(self)
        self.kafka_zk = KafkaZkClient(config["zookeeper.connect"],
                                      session_timeout_ms=config.zookeeper_session_timeout_ms,
                                      connect_timeout_ms=config["zookeeper.connection.timeout.ms"], reactor=reactor)
        self.zk = self.kafka_zk.zk
        self.producer_ids = ProducerIdManager(lambda: self.kafka_zk.allocate_producer_id_block(self.broker_id))
        self.sync = MetadataSync(self.zk, self.metadata, self.on_metadata_change)
        self.controller = Controller(self.broker_id, self.zk, self.kafka_zk, self.metadata,
                                     lambda: self.sync.deleting,
                                     lambda t: self.topic_config(t)["unclean.leader.election.enable"],
                                     config=config, reactor=reactor, broker_epochs=lambda: self.sync.broker_epochs)
        self.fetchers = ReplicaFetcherManager(self.broker_id, reactor, config, self._endpoint_of)
        self.replica_manager.fetchers = self.fetchers
        self.offsets_topic = OffsetsTopic(self)      # group coordinator + __consumer_offsets
        self.replica_manager.role_listeners.append(self.offsets_topic.on_partition_role)
        self.ports: list[Any] = []
        self.factories: list[KafkaServerFactory] = []
        self.creating: set[str] = set()
        self.loops: list[task.LoopingCall] = []
        self.background: dict[str, defer.Deferred] = {}
        self.stopping = False
        self.broker_epoch = -1               # czxid of our registration znode
        registry.load_handlers()

    # -- configuration -----------------------------------------------------------------------------
    def _resolve(self, topic: str | None) -> tuple[dict[str, Any], Any]:
        overrides = {} if topic is None or topic not in self.metadata.topics else self.metadata.topics[topic].config
        cached = self._topic_configs.get(topic or "")
        if cached is not None and cached[0] == overrides:
            return cached[1], cached[2]
        typed = self.config.topic_config(overrides)
        storage = LogConfig.from_properties({k: render(v) for k, v in typed.items() if render(v) is not None})
        self._topic_configs[topic or ""] = (dict(overrides), typed, storage)
        return typed, storage

    def topic_config(self, topic: str | None) -> dict[str, Any]:
        """Effective typed topic config: overrides from ZooKeeper over the broker's defaults."""
        return self._resolve(topic)[0]

    def log_config(self, topic: str | None) -> Any:
        return self._resolve(topic)[1]

    @property
    def is_controller(self) -> bool:
        return self.controller.active

    # -- start / stop ------------------------------------------------------------------------------
    @defer.inlineCallbacks
    def start(self) -> Any:
        yield self.kafka_zk.start()
        yield self.kafka_zk.create_persistent_paths()
        yield self.kafka_zk.ensure_cluster_id()
        if self.broker_id < 0:
            self.broker_id = yield self._generate_broker_id()
            self.replica_manager.broker_id = self.controller.broker_id = self.fetchers.broker_id = self.broker_id
        advertised = self._listen()
        registration = BrokerRegistration(self.broker_id, tuple(advertised), now_ms(), rack=self.config["broker.rack"])
        self.broker_epoch = yield self.kafka_zk.register_broker(registration)
        self.kafka_zk.add_reregistration_listener(self._reregistered)
        self.kafka_zk.add_state_listener(self._session_state)
        yield self.sync.start()
        self._start_loops()
        self.offsets_topic.start()
        log.info("broker %d started, serving %s", self.broker_id,
                 ", ".join(ep.connection_string() for ep in advertised))

    @defer.inlineCallbacks
    def _generate_broker_id(self) -> Any:
        """Kafka's generated ids: bump /brokers/seqid's version; id = version + reserved.broker.max.id."""
        if not self.config["broker.id.generation.enable"]:
            raise KafkaError("broker.id is not set and broker.id.generation.enable is false")
        stat = yield self.zk.set(paths.BROKER_SEQUENCE_ID, b"", -1)
        return stat.version + self.config["reserved.broker.max.id"]

    def _listen(self) -> list[EndPoint]:
        advertised: list[EndPoint] = []
        configured = {ep.listener: ep for ep in self.config.advertised_listeners}
        for ep in self.config.listeners:
            factory = KafkaServerFactory(Dispatcher(self, ep.listener), self.config["socket.request.max.bytes"],
                                         self.config["queued.max.requests"])
            port = self.reactor.listenTCP(ep.port, factory, interface=ep.host or "0.0.0.0")
            self.ports.append(port)
            self.factories.append(factory)
            bound = port.getHost().port
            adv = configured.get(ep.listener, Endpoint(ep.listener, ep.host, bound))
            host = adv.host or socket.getfqdn()
            advertised.append(EndPoint(ep.listener, host, adv.port or bound,
                                       self.config.security_protocol(ep.listener)))
        return advertised

    def _start_loops(self) -> None:
        def every(ms: int, fn: Any) -> None:
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            loop.start(ms / 1000.0, now=False).addErrback(lambda f: log.error("periodic task failed: %s", f.value))
            self.loops.append(loop)

        every(self.config["log.retention.check.interval.ms"], self._retention)
        every(self.config["replica.high.watermark.checkpoint.interval.ms"], lambda: self._off_reactor("checkpoint", self._checkpoint))
        every(max(self.config["replica.lag.time.max.ms"] // 2, 1), self._shrink_isrs)
        if self.cleaner is not None:
            for i in range(self.config["log.cleaner.threads"]):
                every(max(self.config["log.cleaner.backoff.ms"], 1),
                      lambda name=f"cleaner-{i}": self._off_reactor(name, self.cleaner.run))
        flush_interval = self.config["log.flush.scheduler.interval.ms"]
        if flush_interval < 2**62:
            every(flush_interval, lambda: self._off_reactor("flush", lambda: self.log_manager.flush_dirty(now_ms())))

    def _off_reactor(self, name: str, work: Any) -> Any:
        """Run fsync-bound work (checkpoint files, log flushes) in a worker thread: storage allows
        flush() and checkpoint writes beside the reactor thread's appends. One run of each kind at
        a time; the LoopingCall waits for the returned Deferred."""
        if name in self.background or self.stopping:
            return None
        d = threads.deferToThread(work)
        d.addErrback(lambda f: log.error("%s failed: %s", name, f.value))
        # (returning the popped Deferred itself would chain d onto itself: the LoopingCall would
        # wait for ever and the job would run once)
        d.addBoth(lambda _: self.background.pop(name, None) and None)
        self.background[name] = d
        return d

    def _retention(self) -> None:
        self.log_manager.cleanup(now_ms())

    def _checkpoint(self) -> None:
        self.log_manager.checkpoint()

    def _reregistered(self, path: str, czxid: int) -> None:
        if path.endswith(f"/{self.broker_id}"):
            self.broker_epoch = czxid

    def _session_state(self, state: Any) -> None:
        log.info("ZooKeeper session %s", getattr(state, "value", state))
        if getattr(state, "name", "") == "LOST":
            self.controller.resign("ZooKeeper session expired")

    @defer.inlineCallbacks
    def shutdown(self) -> Any:
        if self.stopping:
            return
        self.stopping = True
        log.info("broker %d shutting down", self.broker_id)
        if self.config["controlled.shutdown.enable"] and self.sync.loaded:
            try:
                yield self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed")
        if self.cleaner is not None:
            self.cleaner.shutdown()         # a running pass stops at its next batch
        for loop in self.loops:
            if loop.running:
                loop.stop()
        for port in self.ports:
            yield port.stopListening()
        for factory in self.factories:
            factory.close_all()
        self.offsets_topic.stop()
        self.purgatory.complete_all()
        self.fetchers.shutdown()
        self.controller.resign("shutting down")
        yield self.kafka_zk.stop(2.0)
        for pending in list(self.background.values()):
            yield pending          # a checkpoint or flush still running in its thread
        self._checkpoint()
        self.log_manager.close()
        log.info("broker %d stopped", self.broker_id)

    # -- controlled shutdown -----------------------------------------------------------------------
    @defer.inlineCallbacks
    def _controlled_shutdown(self) -> Any:
        """Kafka's ``KafkaServer.controlledShutdown``: up to ``controlled.shutdown.max.retries``
        attempts, ``controlled.shutdown.retry.backoff.ms`` apart, to have the controller move our
        leaderships away; then wait until our own view shows them gone, so clients get
        NOT_LEADER_OR_FOLLOWER and re-route rather than a closed socket. We stop following first:
        a leader must not add us back to an ISR the controller just took us out of."""
        self.fetchers.shutdown()
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for attempt in range(1, retries + 1):
            try:
                code, remaining = yield self._ask_controller_to_shut_down()
            except Exception as exc:
                code, remaining = None, []
                log.info("controlled shutdown attempt %d failed: %s", attempt, exc)
            if code == ErrorCode.NONE and not remaining:
                log.info("controlled shutdown succeeded (attempt %d)", attempt)
                yield self._leaderships_gone(max(backoff, 2.0))
                return True
            if code is not None:
                log.info("controlled shutdown attempt %d: %s, %d partition(s) still led here", attempt,
                         ErrorCode(code).name, len(remaining))
            if attempt < retries:
                yield task.deferLater(self.reactor, backoff, lambda: None)
        log.warning("proceeding to an unclean shutdown: all %d controlled shutdown attempts failed", retries)
        return False

    @defer.inlineCallbacks
    def _ask_controller_to_shut_down(self) -> Any:
        controller = self.metadata.controller_id
        if controller == self.broker_id and self.controller.active:
            result = yield self.controller.controlled_shutdown(self.broker_id, self.broker_epoch)
            return result
        endpoint = self._endpoint_of(controller) if controller >= 0 else None
        if endpoint is None:
            raise KafkaError(f"no reachable controller (controller id {controller})")
        timeout = self.config["controller.socket.timeout.ms"] / 1000.0
        conn = yield net_client.connect(self.reactor, endpoint[0], endpoint[1], f"broker-{self.broker_id}", timeout)
        try:
            resp = yield conn.request(ApiKey.CONTROLLED_SHUTDOWN, 3,
                                      {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch}, timeout)
        finally:
            conn.close()
        return resp["error_code"], [(r["topic_name"], r["partition_index"]) for r in resp["remaining_partitions"]]

    @defer.inlineCallbacks
    def _leaderships_gone(self, limit_s: float) -> Any:
        """Wait (bounded) until the state watches have told us that we lead no replicated partition."""
        deadline = self.reactor.seconds() + limit_s
        while self.reactor.seconds() < deadline:
            if not any(p.is_leader and len(p.replicas) > 1 for p in self.replica_manager.partitions.values()):
                return
            yield task.deferLater(self.reactor, 0.01, lambda: None)

    # -- metadata changes --------------------------------------------------------------------------
    def on_metadata_change(self, change: Change) -> None:
        if change.kind == "state":
            self._apply_state(change.topic, change.partition)
        elif change.kind == "topic":
            for p in self.metadata.topics[change.topic].assignment:
                self._apply_state(change.topic, p)
        elif change.kind == "topic-removed":
            self._topic_configs.pop(change.topic, None)
            self.replica_manager.remove_topic(change.topic, delete=True)
        elif change.kind == "config":
            self.replica_manager.update_config(change.topic, self.log_config(change.topic))
        elif change.kind == "controller":
            self.controller.on_controller_changed()
        self.purgatory.check(METADATA_CHANGED)
        self.controller.reconcile()

    def _apply_state(self, topic: str, partition: int) -> None:
        info = self.metadata.topics.get(topic)
        state = self.metadata.states.get((topic, partition))
        if info is None or state is None or partition not in info.assignment:
            return
        try:
            self.replica_manager.apply_state(topic, partition, info.assignment[partition], state, self.log_config(topic))
        except Exception:
            log.exception("%s-%d: could not apply partition state %s", topic, partition, state)

    def auto_create_topic(self, name: str) -> None:
        """Metadata's auto-creation: fire and forget; clients retry until leaders exist."""
        if name in self.creating or name in self.metadata.topics:
            return
        try:
            assignment, overrides = self.admin.plan_topic(name, self.config["num.partitions"],
                                                          self.config["default.replication.factor"], [], {})
        except KafkaError as exc:
            log.warning("cannot auto-create topic %s: %s", name, exc)
            return
        self.creating.add(name)
        d = self.admin.create_topic(name, assignment, overrides)
        d.addErrback(lambda f: log.info("auto-creation of %s: %s", name, f.value))
        d.addBoth(lambda _: self.creating.discard(name))

    def replicas_fetched(self, part: Any, replica_id: int, fetch_offset: int, now: int) -> None:
        """A follower fetched from ``fetch_offset``: its log ends there; the ISR may grow and the
        high watermark may move."""
        if replica_id not in part.follower_end_offsets:
            return
        part.record_follower_fetch(replica_id, fetch_offset, now)
        grown = part.isr_to_expand(replica_id)
        if grown is not None:
            self._write_isr(part, grown, f"replica {replica_id} caught up")
        if part.maybe_advance_high_watermark():
            self.purgatory.check(part.key)

    def _shrink_isrs(self) -> None:
        lag_max = self.config["replica.lag.time.max.ms"]
        now = now_ms()
        for part in list(self.replica_manager.partitions.values()):
            shrunk = part.isr_to_shrink(now, lag_max)
            if shrunk is not None:
                self._write_isr(part, shrunk, f"replicas {sorted(set(part.isr) - set(shrunk))} fell behind")

    def _write_isr(self, part: Any, isr: list[int], why: str) -> None:
        """The leader writes ISR changes itself (pre-2.7 Kafka), conditional on the state znode's
        version; on a lost race the controller's newer state arrives through the watch."""
        if part.isr_write_pending or part.state is None:
            return
        st = part.state
        part.isr_write_pending = True
        d = self.kafka_zk.update_partition_state(
            part.topic, part.index, StateZNode(st.leader, st.leader_epoch, tuple(isr), st.controller_epoch),
            st.zk_version)

        def done(result: Any) -> None:
            part.isr_write_pending = False
            if isinstance(result, Updated) and part.state is st:
                part.state = PartitionState(st.leader, st.leader_epoch, list(isr), st.controller_epoch, result.version)
                log.info("%s-%d: ISR %s -> %s (%s)", part.topic, part.index, st.isr, isr, why)
                if part.maybe_advance_high_watermark():
                    self.purgatory.check(part.key)
                self.purgatory.check(part.key)

        def failed(f: Any) -> None:
            part.isr_write_pending = False
            log.warning("%s-%d: ISR update failed: %s", part.topic, part.index, f.value)

        d.addCallbacks(done, failed)

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        info = self.metadata.brokers.get(broker_id)
        if info is None:
            return None
        listener = self.config["inter.broker.listener.name"] or self.config.listeners[0].listener
        return info.endpoint(listener)


def run_broker(config: BrokerConfig) -> int:
    from twisted.internet import reactor

    assert IReactorCore.providedBy(reactor)
    exit_code = {"code": 0}
    try:
        broker = KafkaBroker(config, reactor)
    except Exception as exc:
        log.error("cannot start broker: %s", exc)
        return 1

    def failed(f: Any) -> None:
        log.error("broker start-up failed: %s", f.getErrorMessage())
        exit_code["code"] = 1
        reactor.stop()

    reactor.callWhenRunning(lambda: broker.start().addErrback(failed))
    reactor.addSystemEventTrigger("before", "shutdown", broker.shutdown)
    reactor.run()
    return exit_code["code"]
