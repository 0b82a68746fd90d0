"""The broker: wires configuration, storage, ZooKeeper, the controller and the listeners.

Start-up follows Kafka's order: logs are recovered before anything else (blocking, before the
reactor runs: there is nothing to serve yet), then ZooKeeper is connected, the listeners are
bound (their ports are what ``/brokers/ids/<id>`` registers), the broker registers and loads the
cluster's metadata, and only then do the listeners accept connections (Kafka's
``startProcessingRequests``): a client waits in the listen backlog instead of being answered from
an empty metadata cache while a restarted broker waits for its old registration to expire.
Shutdown reverses it: first, with ``controlled.shutdown.enable``, the broker stops following
and asks the controller to move its leaderships away while it still serves (Kafka's
ControlledShutdown); then it stops accepting, answers waiting requests, closes the ZooKeeper
session (our ephemeral registration vanishes at once), flushes and closes the logs with a
clean-shutdown marker.

Log-dir failure (Kafka's ``ReplicaManager.handleLogDirFailure``) is ``storage_events.py``'s: the
broker keeps serving its other dirs, still registered; with no dir left it stops.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorCore
from twisted.python.failure import Failure

from kafkalite.broker import registry
from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.config_changes import ConfigChangeManager
from kafkalite.broker.credentials import UserCredentials
from kafkalite.broker.fetch_session import FetchSessionCache
from kafkalite.broker.controlled_shutdown import ControlledShutdown
from kafkalite.broker.heap import HeapKeeper
from kafkalite.broker.inter_broker import InterBrokerRequests
from kafkalite.broker.metrics import BrokerMetrics, MetricsSources, registry_for
from kafkalite.broker.reactor_delay import ReactorDelayMonitor
from kafkalite.broker.metadata_router import MetadataRouter
from kafkalite.broker.metadata_sync import MetadataChange, MetadataSync
from kafkalite.broker.offsets_topic import OffsetsTopic
from kafkalite.broker.producer_ids import ProducerIdManager
from kafkalite.broker.txn_markers import TxnMarkerChannel
from kafkalite.broker.txn_topic import TransactionTopic
from kafkalite.broker.periodic_tasks import PeriodicTasks
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.dynamic_config import DynamicBrokerConfigSync
from kafkalite.broker.listeners import ListenerManager
from kafkalite.broker.log_dir_mover import LogDirMover
from kafkalite.broker.authorizer import AclAuthorizer
from kafkalite.broker.cleaner_threads import CleanerThreads
from kafkalite.broker.dynamic_log_config import DynamicLogConfig
from kafkalite.broker.quotas import BrokerQuotas, QuotaConfigSync, ReplicationThrottleRates
from kafkalite.broker.scheduler import BrokerScheduler
from kafkalite.coordination.acls import AclZkStore
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.quota import RateConfig
from kafkalite.broker.runtime import BlockingRunner, Clock, ThreadPoolRunner
from kafkalite.broker.services import BrokerServices
from kafkalite.broker.status_http import StatusServer
from kafkalite.broker.storage_events import StorageEvents
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.broker.zk_session import BrokerSession
from kafkalite.config import BrokerConfig, ConfigError, Endpoint
from kafkalite.security import jaas
from kafkalite.controller.controller import Controller
from kafkalite.coordination import KafkaZkClient
from kafkalite.metadata import MetadataCache
from kafkalite.net.server import KafkaServerFactory
from kafkalite.replication.fetcher import ReplicaFetcherManager
from kafkalite.storage import LogManager

log = logging.getLogger(__name__)


class StartupInterrupted(Exception):
    """:meth:`KafkaBroker.start` stopped early because a shutdown was requested."""


def zookeeper_credentials(set_acl: bool) -> tuple[str, str] | None:
    """The broker's ZooKeeper login, as a Kafka broker finds it: the JAAS Client section of the
    file KAFKA_OPTS names (read once at start). ``zookeeper.set.acl=true`` without one is a
    configuration error (an unauthenticated session cannot create creator-only znodes)."""
    try:
        login = jaas.zookeeper_login(os.environ.get("KAFKA_OPTS"))
    except jaas.JaasError as exc:
        raise ConfigError(str(exc)) from None
    if set_acl and login is None:
        raise ConfigError("zookeeper.set.acl=true needs a ZooKeeper login: a JAAS file with a Client section "
                          "(username, password) named in KAFKA_OPTS by -Djava.security.auth.login.config=")
    return login


class KafkaBroker:
    """One broker, as a composition root: it builds the parts (storage, ZooKeeper session,
    replica manager, controller, coordinators, listeners, schedulers), wires them to each other
    (:meth:`_wire`), and starts and stops them in Kafka's order; the work is the parts' own
    (``listeners.py``, ``metadata_router.py``, ``scheduler.py`` + ``periodic_tasks.py``,
    ``cleaner_threads.py``, ``controlled_shutdown.py``, ``inter_broker.py``, ``zk_session.py``,
    ``status_http.py``, ``config_changes.py``, the reconfigurables of ``dynamic_config.py``).

    ``reactor`` is the broker's one clock and event loop; ``zk`` (a KafkaZkClient, default: one
    connected to ``zookeeper.connect``) and ``blocking`` (where blocking work runs, default: the
    reactor's thread pool) are injected so that the in-process tests run brokers on a memory
    reactor over an in-memory ZooKeeper.
    """

    def __init__(self, config: BrokerConfig, reactor: Any, *, zk: KafkaZkClient | None = None,
                 blocking: BlockingRunner | None = None) -> None:
        self.config = config
        self.reactor = reactor
        self.clock = Clock(reactor)
        self.blocking: BlockingRunner = blocking or ThreadPoolRunner(reactor)
        self.broker_id = config.broker_id
        self.metadata = MetadataCache()
        self.topic_configs = TopicConfigs(config, self.metadata)
        self.purgatory = Purgatory(reactor)
        started = time.monotonic()
        # Blocking on purpose: logs are recovered before the reactor runs (nothing to serve yet).
        self.log_manager = LogManager(config.log_dirs, self.topic_configs.log_config(None), clock=self.clock.now_ms,
                                      producer_id_expiration_ms=config["producer.id.expiration.ms"])
        self.stopping = False
        # storage's failures and deferred file work reach the broker through this from now on
        self.storage_events = StorageEvents(reactor, self.blocking, self.log_manager, lambda: self.replica_manager,
                                            lambda: self.kafka_zk, lambda: self.broker_id, lambda: self.broker_epoch,
                                            lambda: self.stopping)
        log.info("loaded %d partition log(s) in %.2f s", len(self.log_manager.logs()),
                 time.monotonic() - started)
        self.scheduler = BrokerScheduler(reactor, self.blocking, lambda: self.stopping)
        self.cleaner_threads = CleanerThreads(config, reactor, self.log_manager, self.clock.now_ms, self.scheduler)
        self.kafka_zk = zk or KafkaZkClient(config["zookeeper.connect"],
                                            session_timeout_ms=config.zookeeper_session_timeout_ms,
                                            connect_timeout_ms=config["zookeeper.connection.timeout.ms"],
                                            reactor=reactor, secure=config["zookeeper.set.acl"],
                                            digest_auth=zookeeper_credentials(config["zookeeper.set.acl"]))
        self.replica_manager = ReplicaManager(self.broker_id, config, self.log_manager, self.purgatory,
                                              self.topic_configs, self.clock, self.metadata, self.kafka_zk)
        self.topics = TopicAdmin(config, self.metadata, self.kafka_zk, self.purgatory)
        self.producer_ids = ProducerIdManager(lambda: self.kafka_zk.allocate_producer_id_block(self.broker_id))
        self.sync = MetadataSync(self.kafka_zk.zk, self.metadata, self._on_metadata_change,
                                 call_soon=lambda fn: reactor.callLater(0, fn))
        self.inter_broker = InterBrokerRequests(config, reactor, self.metadata, lambda: self.broker_id,
                                                lambda: self.replica_manager.describe_log_dirs(None))
        self.controller = Controller(self.broker_id, self.kafka_zk, self.metadata,
                                     lambda: self.sync.deleting,
                                     lambda t: self.topic_configs.effective(t)["unclean.leader.election.enable"],
                                     config=config, reactor=reactor, broker_epochs=lambda: self.sync.broker_epochs,
                                     describe_log_dirs=self.inter_broker.describe_log_dirs_of,
                                     preferred_election=lambda: self.sync.preferred_election,
                                     reassign_request=lambda: self.sync.reassign_request)
        # our registration, its epoch, the reactions to the session's expiry
        self.session = BrokerSession(config, self.kafka_zk, self.clock, lambda: self.broker_id, self.controller,
                                     lambda: self.sync.broker_epochs)
        self.credentials = UserCredentials(self.kafka_zk)
        # one listener on /config/changes for both config syncs (Kafka's ZkConfigManager)
        self.config_changes = ConfigChangeManager(self.kafka_zk.zk)
        self.dynamic_config = DynamicBrokerConfigSync(self.kafka_zk, config, lambda: self.broker_id)
        # authorizer.class.name set: Kafka's AclAuthorizer over /kafka-acl*; unset: none
        self.authorizer = (AclAuthorizer(AclZkStore(self.kafka_zk.zk), super_users=config["super.users"],
                                         allow_if_no_acl=config["allow.everyone.if.no.acl.found"],
                                         now_ms=self.clock.now_ms)
                           if config["authorizer.class.name"] else None)
        # our own inter-broker identity (and, in ListenerManager, the listeners' TLS and SASL):
        # built before the reactor runs, so a bad key store or JAAS entry stops start-up with one line
        self.listeners = ListenerManager(config, reactor, self.credentials, self.blocking, self.services,
                                         self.session.endpoints_changed)
        self.quotas = BrokerQuotas(RateConfig(config["quota.window.num"], config["quota.window.size.seconds"] * 1000),
                                   RateConfig(config["replication.quota.window.num"],
                                              config["replication.quota.window.size.seconds"] * 1000))
        self.replication_rates = ReplicationThrottleRates(config, self.quotas.replication)
        self.metadata_router = MetadataRouter(lambda: self.broker_id, lambda: self.first_broker_epoch, self.metadata,
                                              lambda: self.sync, self.replica_manager, self.topic_configs,
                                              self.quotas, self.controller, self.purgatory)
        self.fetchers = ReplicaFetcherManager(self.broker_id, reactor, config, self.inter_broker.endpoint_of,
                                              self.inter_broker.connect,
                                              quota=self.quotas.replication.follower)
        self.log_dir_mover = LogDirMover(self.replica_manager, self.log_manager, reactor, self.clock,
                                         config["replica.fetch.max.bytes"], self.quotas.replication.alter_log_dirs)
        self.groups = OffsetsTopic(config, self.clock, self.metadata, self.topics, self.replica_manager,
                                   self.blocking)      # group coordinator + __consumer_offsets
        self.metrics = BrokerMetrics()
        self.reactor_delay = ReactorDelayMonitor(reactor, self.metrics.reactor_delay)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                config["min.incremental.fetch.session.eviction.ms"])
        self.quota_sync = QuotaConfigSync(self.kafka_zk, self.quotas)
        self.metrics_registry = registry_for(MetricsSources(
            lambda: self.broker_id, self.metrics, self.replica_manager, self.controller, self.metadata,
            lambda: self.groups.coordinator, self.log_manager,
            self.listeners.connections,
            fetch_sessions=self.fetch_sessions))
        self.status = StatusServer(config, reactor, self.metrics_registry,
                                   lambda: self.session.health(list(self.log_manager.offline_dirs)))
        self.periodic_tasks = PeriodicTasks(config, self.scheduler, self.clock, self.log_manager,
                                            self.replica_manager, self.purgatory)
        markers = TxnMarkerChannel(lambda: self.broker_id, reactor, self.metadata, self.replica_manager,
                                   self.inter_broker.endpoint_of, request_timeout_ms=config["request.timeout.ms"],
                                   groups=self.groups.coordinator,
                                   connect=self.inter_broker.connect)
        self.txns = TransactionTopic(config, self.clock, self.metadata, self.topics, self.replica_manager,
                                     self.blocking, self.producer_ids, markers)   # transaction coordinator
        self.controlled_shutdown = ControlledShutdown(config, reactor, self.metadata, self.controller,
                                                      self.replica_manager, self.fetchers, self.inter_broker,
                                                      lambda: self.broker_id, lambda: self.broker_epoch)
        self._wire()
        registry.load_handlers()

    def _wire(self) -> None:
        """The second phase of construction: the links between parts built above that each
        needed the other to exist (Kafka's KafkaServer.startup does the same after creating its
        managers). Nothing runs yet; start() connects and registers."""
        self.replica_manager.fetchers = self.fetchers
        # role changes of __consumer_offsets / __transaction_state partitions load and unload the
        # coordinators (in this order)
        self.replica_manager.role_listeners.append(self.groups.on_partition_role)
        self.replica_manager.role_listeners.append(self.txns.on_partition_role)
        self.replica_manager.isr_listener = self.metrics.isr_changed
        self.config_changes.add_watcher(self.dynamic_config)
        self.config_changes.add_watcher(self.quota_sync)
        # dynamic broker configs reach these, in this order (Kafka's addReconfigurable)
        for reconfigurable in (self.replication_rates, self.listeners, self.cleaner_threads,
                               DynamicLogConfig(self.topic_configs, self.metadata, self.log_manager,
                                                self.replica_manager, self.purgatory)):
            self.dynamic_config.add_reconfigurable(reconfigurable)

    def _adopt_broker_id(self, broker_id: int) -> None:
        """A generated broker id (``broker.id`` unset) reaches the parts that keep their own copy."""
        self.broker_id = broker_id
        self.replica_manager.broker_id = self.controller.broker_id = self.fetchers.broker_id = broker_id

    def services(self) -> BrokerServices:
        """What handlers get (built once the broker id is known)."""
        return BrokerServices(self.broker_id, self.config, self.clock, self.metadata, self.topic_configs,
                              self.replica_manager, self.groups, self.topics, self.producer_ids, self.controller,
                              self.metrics, self.credentials, self.txns, self.quotas, self.authorizer,
                              dynamic_config=self.dynamic_config, fetch_sessions=self.fetch_sessions)

    # -- start / stop ------------------------------------------------------------------------------
    def start(self) -> defer.Deferred:
        """Connect, register, load metadata, start the background loops. A shutdown requested
        meanwhile (SIGTERM while a big log dir loads) ends it with :class:`StartupInterrupted`:
        at the next step, or as the failure of the step it cut short (a ZooKeeper read on the
        session shutdown() closed), so nothing starts after shutdown() has stopped it."""
        def interrupted(f: Failure) -> Failure:
            if self.stopping and not f.check(StartupInterrupted):
                return Failure(StartupInterrupted(f"shutdown requested during start-up ({f.getErrorMessage()})"))
            return f
        return self._start().addErrback(interrupted)

    @defer.inlineCallbacks
    def _start(self) -> Any:
        yield self.kafka_zk.start()
        yield self.kafka_zk.create_persistent_paths()
        yield self.kafka_zk.ensure_cluster_id()
        if self.authorizer is not None:
            yield self.authorizer.start()       # ACLs loaded before the first request is served
        if self.broker_id < 0:
            self._adopt_broker_id((yield self.session.generate_broker_id()))
        yield self.config_changes.start()      # before the syncs load: no change falls in between
        yield self.dynamic_config.start()
        self._unless_stopping("listening")
        advertised = self.listeners.start()
        self.status.listen()
        registration = yield self.session.register(advertised)
        if tuple(self.listeners.advertised()) != registration.endpoints:
            # a dynamic listener change landed while we registered
            yield self.listeners.apply_listeners()
        self._unless_stopping("loading metadata")
        self.session.watch()
        yield self.sync.start()
        yield self.quota_sync.start()
        self._unless_stopping("starting the background loops")
        self.periodic_tasks.start()
        self.cleaner_threads.start()
        self.log_dir_mover.start()
        self.reactor_delay.start()
        self.groups.start()
        self.storage_events.offline_at_start()
        self.txns.start()
        yield self.sync.initial_view()
        self.listeners.start_processing()
        log.info("broker %d started, serving %s", self.broker_id,
                 ", ".join(ep.connection_string() for ep in advertised))

    def _unless_stopping(self, step: str) -> None:
        if self.stopping:
            raise StartupInterrupted(f"shutdown requested before {step}")

    # views of the listener manager's state (tests and tools read them off the broker)
    @property
    def bound(self) -> dict[str, tuple[Endpoint, Any, KafkaServerFactory]]:
        return self.listeners.bound

    @property
    def ports(self) -> list[Any]:
        return self.listeners.ports

    @property
    def factories(self) -> list[KafkaServerFactory]:
        return self.listeners.factories

    # views of the parts' state (tests read them off the broker)
    @property
    def loops(self) -> list[task.LoopingCall]:
        return self.scheduler.loops

    @property
    def cleaner_loops(self) -> list[task.LoopingCall]:
        return self.cleaner_threads.loops

    @property
    def broker_epoch(self) -> int:
        """The czxid of our registration (-1 before it), as ``zk_session.BrokerSession`` keeps it."""
        return self.session.broker_epoch

    @property
    def first_broker_epoch(self) -> int:
        return self.session.first_broker_epoch

    @property
    def fatal(self) -> str | None:
        """Why the broker stopped by itself (every log dir offline), for the exit code."""
        return self.storage_events.fatal

    @defer.inlineCallbacks
    def shutdown(self) -> Any:
        if self.stopping:
            return
        self.stopping = True
        self.listeners.shutting_down = True
        log.info("broker %d shutting down", self.broker_id)
        if self.authorizer is not None:
            self.authorizer.stop()
        if self.config["controlled.shutdown.enable"] and self.sync.loaded:
            try:
                yield self.controlled_shutdown.run()
            except Exception:
                log.exception("controlled shutdown failed")
        self.cleaner_threads.stop()         # a running pass stops at its next batch
        self.scheduler.stop()
        self.reactor_delay.stop()
        self.log_dir_mover.stop()
        yield self.listeners.stop_accepting()
        yield self.status.stop()
        self.listeners.close_connections()
        self.groups.stop()
        self.txns.stop()
        self.purgatory.complete_all()
        self.fetchers.shutdown()
        self.controller.resign("shutting down")
        yield self.kafka_zk.stop(2.0)
        yield self.scheduler.wait()          # a checkpoint or flush still running in its thread
        self.periodic_tasks.checkpoint()
        self.log_manager.close()
        log.info("broker %d stopped", self.broker_id)

    def _on_metadata_change(self, change: MetadataChange) -> None:
        self.metadata_router.on_change(change)    # (the router is built after the sync it listens to)


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
        if f.check(StartupInterrupted):
            log.info("%s", f.getErrorMessage())   # SIGTERM while starting: the shutdown goes on
            return
        log.error("broker start-up failed: %s", f.getErrorMessage())
        exit_code["code"] = 1
        reactor.stop()

    # the collector is process-wide: kept here, by the broker's own process, not by KafkaBroker
    # (in-process test brokers share the test runner's heap)
    heap = HeapKeeper(reactor)

    def started(_: Any) -> None:
        heap.start()

    reactor.callWhenRunning(lambda: broker.start().addCallbacks(started, failed))
    reactor.addSystemEventTrigger("before", "shutdown", heap.stop)
    reactor.addSystemEventTrigger("before", "shutdown", broker.shutdown)
    reactor.run()
    if broker.fatal is not None:
        log.error("broker stopped: %s", broker.fatal)
        return 1
    return exit_code["code"]
