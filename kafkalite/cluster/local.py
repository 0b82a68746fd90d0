"""A local kafkalite cluster under one data directory: ZooKeeper (one server or an ensemble of
3 or 5) plus N brokers as plain processes, and optionally a schema registry.

Layout of the data directory (``var/cluster`` by default, ``var/demo`` for the demo)::

    cluster.json                 state file: ports, pids (+ kernel start times), ids, chroot
    zookeeper/zoo.cfg, data/, zookeeper.log         a standalone ZooKeeper's config, data, log
    zookeeper-<myid>/zoo.cfg, data/myid, zookeeper.log   (an ensemble: one directory per server)
    broker-<id>/server.properties, data/, server.log  each broker's config, partition logs
                                                      (log.dirs) and its log
    schema-registry/schema-registry.properties, schema-registry.log   the registry (if any)
    console/console.log          the web console (if any)

Readiness is what ZooKeeper says, never a fixed sleep: every ZooKeeper server serves
(``srvr``/``conf``) and the ensemble has a quorum with one leader, every broker registered
``/brokers/ids/<id>`` in this incarnation, and ``/controller`` names a live broker; a schema
registry (started last: it is a client of the brokers) once it answers ``GET /``, which it does
only after replaying ``_schemas``, and has logged that it knows its primary (writes work). Teardown always runs, also after a failed start: the registry
first, then SIGTERM to every broker in parallel, then SIGKILL for those still there after the
grace period, then every ZooKeeper server.

The tool reads ZooKeeper with a plain blocking kazoo client: it is an operator tool outside the
broker (like Kafka's zookeeper-shell), so the broker's rule "kazoo only behind coordination's
Deferred API" does not apply to it.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkalite.cluster.processes import (SERVING_MODES, BrokerProcess, ClusterError, ConnectWorkerProcess,
                                         ConsoleProcess, HttpServiceProcess, SchemaRegistryProcess, SqlServerProcess,
                                         ZooKeeperEnsemble, ZooKeeperProcess, free_port, port_in_use, wait_until)

STATE_FILE = "cluster.json"
STATE_VERSION = 2          # 2: "zookeeper" lists the ensemble's servers; 1 had one server's port
REGISTRY_DIR = "schema-registry"
CONSOLE_DIR = "console"
DEFAULT_FIRST_ID = 101

log = logging.getLogger(__name__)


def listener_address(listeners: str, name: str, broker_id: int) -> str:
    """``host:port`` of the listener called ``name`` in a broker's ``listeners`` value (an empty
    or wildcard host is reached on 127.0.0.1)."""
    for entry in (e.strip() for e in listeners.split(",")):
        listener, sep, address = entry.partition("://")
        if sep and listener.strip().upper() == name.upper():
            host, _, port = address.rpartition(":")
            if not port.isdigit() or int(port) == 0:
                raise ClusterError(f"broker {broker_id}: listener {name} has no fixed port ({entry})")
            return f"{'127.0.0.1' if host in ('', '0.0.0.0', '[::]') else host}:{port}"
    raise ClusterError(f"broker {broker_id} has no {name} listener (listeners={listeners})")


@dataclass
class PartitionStatus:
    topic: str
    partition: int
    replicas: list[int]
    leader: int
    isr: list[int]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class ZooKeeperServerStatus:
    server_id: int
    mode: str                  # leader / follower / standalone / not serving / down
    pid: int | None
    port: int


@dataclass
class ClusterStatus:
    """What ZooKeeper and the process table say about the cluster right now."""

    zookeeper_alive: bool                                       # ZooKeeper serves (has a quorum)
    processes: dict[int, tuple[bool, int | None, int | None]]   # broker id -> (alive, pid, port)
    zookeepers: list[ZooKeeperServerStatus] = field(default_factory=list)   # our own servers
    registered: list[int] = field(default_factory=list)
    controller: int | None = None
    partitions: list[PartitionStatus] = field(default_factory=list)
    #: the cluster's schema registry: (alive, pid, url), None when it has none
    schema_registry: tuple[bool, int | None, str] | None = None
    #: the cluster's web console: (alive, pid, url), None when it has none
    console: tuple[bool, int | None, str] | None = None

    @property
    def under_replicated(self) -> list[PartitionStatus]:
        return [p for p in self.partitions if p.under_replicated]

    @property
    def offline(self) -> list[PartitionStatus]:
        return [p for p in self.partitions if p.leader < 0 or p.leader not in self.registered]


class LocalCluster:
    """ZooKeeper (own, or an external connect string) and brokers ``first_id ..`` under ``data_dir``.

    Ports: every ZooKeeper server and each broker get ports that are free at ``up`` time and keep
    them for the life of the data directory (a broker restarted by ``start_broker`` comes back on
    the same address, as clients expect; a restarted ZooKeeper server keeps its ``server.N``
    line). ``base_port`` chooses the brokers' instead: broker i listens on ``base_port + i``;
    ``zookeeper_port`` the ZooKeeper client ports (server N on ``zookeeper_port + N - 1``);
    ``ephemeral_ports`` lets each broker bind port 0 at every start (the registration says which).
    With ``metrics`` each broker also gets a free port for ``metrics.port`` (/metrics, /health),
    kept like its listener's.

    ZooKeeper: our own ``zookeepers`` servers (1, 3 or 5; started by ``up``, stopped by
    ``down``; brokers get every server in ``zookeeper.connect``), or someone else's that we only
    use, never start or stop: a connect string (``zookeeper_connect``) or a running
    ``zookeeper`` process shared by several clusters, each in its own ``chroot`` (the tests).

    ``schema_registry=True`` adds one ``kafkalite-schema-registry`` (on ``schema_registry_port``,
    default a free port), started after the brokers and stopped before them; ``kafkalite-cluster
    up`` asks for it unless ``--no-schema-registry``. ``console=True`` adds a ``kafkalite-console``
    (on ``console_port``, default a free port) pointed at the brokers, their metrics, ZooKeeper and
    the registry, started last and stopped first (a client of them all). ``connect_workers``
    adds distributed Kafka Connect workers (worker i's REST API on ``connect_port + i``, default
    free ports); ``sql=True`` a ``kafkalite-sql-server`` (on ``sql_port``, default a free port).

    A secured cluster: ``client_listener`` names the brokers' listener (in their ``listeners``,
    e.g. ``SASL_SSL``) that the SQL server connects to, with ``client_security`` (Kafka client
    properties: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
    ``ssl.truststore.*``); the registry, the Connect workers and the console stay on the
    launcher's PLAINTEXT listener, which its own readiness checks use too.
    """

    broker_class: type[BrokerProcess] = BrokerProcess

    def __init__(self, data_dir: str | os.PathLike[str], size: int = 3, first_id: int = DEFAULT_FIRST_ID,
                 zookeeper_port: int = 0, base_port: int = 0, overrides: dict[str, str] | None = None,
                 zookeeper_connect: str | None = None, chroot: str = "", ephemeral_ports: bool = False,
                 zookeeper: ZooKeeperProcess | None = None, zookeepers: int = 1,
                 zookeeper_tick_ms: int = 2000, ensemble: ZooKeeperEnsemble | None = None,
                 schema_registry: bool = False, schema_registry_port: int = 0,
                 metrics: bool = True, console: bool = False, console_port: int = 0,
                 connect_workers: int = 0, connect_port: int = 0, sql: bool = False, sql_port: int = 0,
                 client_listener: str | None = None, client_security: dict[str, str] | None = None) -> None:
        self.dir = Path(data_dir).resolve()
        #: the listener (name) and client properties of the SQL server's connections to the brokers
        self.client_listener = client_listener
        self.client_security = dict(client_security or {})
        self.overrides = dict(overrides or {})
        self.chroot = chroot.rstrip("/")
        if zookeeper is not None and zookeeper_connect is None:
            zookeeper_connect = zookeeper.hosts
        #: None exactly when the ZooKeeper is ours to start and stop
        self.external_zk = zookeeper_connect
        #: our own ZooKeeper servers (None when the ZooKeeper is external or shared)
        self.ensemble: ZooKeeperEnsemble | None = None
        if zookeeper_connect is None:
            self.ensemble = ensemble or ZooKeeperEnsemble(self.dir, zookeepers, zookeeper_tick_ms,
                                                          client_port=zookeeper_port)
        #: what brokers connect to: our ensemble, or the shared server (tests), or None (external)
        self.zookeeper: ZooKeeperEnsemble | ZooKeeperProcess | None = self.ensemble or zookeeper
        self.size = size
        self.brokers: list[BrokerProcess] = []
        for i in range(size):
            port = 0 if ephemeral_ports else (base_port + i if base_port else free_port())
            self.add_broker(first_id + i, port=port, metrics_port=free_port() if metrics else 0)
        self._zk: KazooClient | None = None
        #: the registry (None without one); its bootstrap list is filled in once the brokers run
        self.registry: SchemaRegistryProcess | None = None
        if schema_registry:
            self.registry = SchemaRegistryProcess(self.dir, "", schema_registry_port, name=REGISTRY_DIR)
        #: Kafka Connect workers in distributed mode (one group), started after the brokers
        self.connect: list[ConnectWorkerProcess] = [
            ConnectWorkerProcess(self.dir, "", connect_port + i if connect_port else 0, name=f"connect-{i}")
            for i in range(connect_workers)]
        #: the streaming SQL server (None without one), started after the registry
        self.sql: SqlServerProcess | None = SqlServerProcess(self.dir, "", sql_port) if sql else None
        #: the web console (None without one); pointed at the cluster once it runs
        self.console: ConsoleProcess | None = None
        if console:
            self.console = ConsoleProcess(self.dir, "", console_port, name=CONSOLE_DIR)

    # -- construction ---------------------------------------------------------------------
    def add_broker(self, broker_id: int, overrides: dict[str, str] | None = None, port: int = 0,
                   cls: type[BrokerProcess] | None = None, metrics_port: int = 0) -> BrokerProcess:
        broker = (cls or self.broker_class)(self, broker_id, {**self.default_overrides(), **self.overrides, **(overrides or {})}, port,
                                            metrics_port)
        self.brokers.append(broker)
        return broker

    def default_overrides(self) -> dict[str, str]:
        """Settings that suit a cluster on one machine (Kafka's defaults otherwise)."""
        size = max(self.size, 1)
        return {
            # Kafka's default of 3 cannot be met by a smaller cluster; 10 partitions instead of
            # 50 keep the offsets topic's replicas light on a laptop.
            "offsets.topic.replication.factor": str(min(3, size)),
            "offsets.topic.num.partitions": "10",
            # the same for __transaction_state (Kafka: RF 3, min.isr 2, 50 partitions)
            "transaction.state.log.replication.factor": str(min(3, size)),
            "transaction.state.log.min.isr": str(min(2, size)),
            "transaction.state.log.num.partitions": "10",
        }

    @property
    def owns_zookeeper(self) -> bool:
        """True if ``up``/``down`` start and stop ``self.ensemble``; False for a shared or external one."""
        return self.ensemble is not None

    @property
    def zk_hosts(self) -> str:
        """host:port of every ZooKeeper server, comma-separated (without the chroot)."""
        if self.ensemble is not None:
            return self.ensemble.hosts
        assert self.external_zk is not None
        return self.external_zk

    @property
    def zk_connect(self) -> str:
        return f"{self.zk_hosts}{self.chroot}"

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def broker(self, broker_id: int) -> BrokerProcess:
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        raise ClusterError(f"no broker {broker_id} in this cluster (brokers: "
                           f"{', '.join(str(b.broker_id) for b in self.brokers)})")

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.port)

    @property
    def client_bootstrap(self) -> str:
        """The brokers' addresses on ``client_listener`` (from each broker's ``listeners``), or the
        PLAINTEXT :attr:`bootstrap` without one."""
        if self.client_listener is None:
            return self.bootstrap
        return ",".join(listener_address(b.properties().get("listeners", ""), self.client_listener, b.broker_id)
                        for b in self.brokers)

    # -- ZooKeeper view -------------------------------------------------------------------
    @property
    def zk(self) -> KazooClient:
        """A blocking kazoo client on the ZooKeeper root (paths are prefixed with the chroot)."""
        if self._zk is None:
            client = KazooClient(hosts=self.zk_hosts, timeout=10)
            try:
                client.start(15)
            except Exception as exc:
                client.close()
                raise ClusterError(f"ZooKeeper at {self.zk_hosts} not reachable: {exc}") from None
            self._zk = client
        return self._zk

    def zk_get(self, path: str) -> bytes | None:
        """Data of ``path`` inside this cluster's chroot, None if absent or unreachable."""
        try:
            return self.zk.get(self.chroot + path)[0]
        except NoNodeError:
            return None
        except Exception:  # noqa: BLE001 - a readiness poll treats "cannot tell" as "not yet"
            return None

    def zk_children(self, path: str) -> list[str]:
        try:
            return self.zk.get_children(self.chroot + path)
        except NoNodeError:
            return []

    def controller_id(self) -> int | None:
        """The controller's broker id (0 is a valid id), None when there is no /controller."""
        data = self.zk_get("/controller")
        return None if data is None else json.loads(data)["brokerid"]

    def registered_ids(self) -> list[int]:
        return sorted(int(c) for c in self.zk_children("/brokers/ids"))

    def close_zk(self) -> None:
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001 - closing a broken session must not mask the real error
                pass
            self._zk = None

    # -- lifecycle ------------------------------------------------------------------------
    def up(self, timeout: float = 90.0, before_brokers: Callable[[], None] | None = None) -> "LocalCluster":
        """Start ZooKeeper (if ours) and every broker; wait for registration and a controller.
        ``before_brokers`` runs once ZooKeeper serves (e.g. to write the brokers' own SCRAM
        credentials, as Kafka's docs do before a SASL cluster starts). On any failure everything
        started is stopped again before the error propagates."""
        self.dir.mkdir(parents=True, exist_ok=True)
        running = [b.broker_id for b in self.brokers if b.alive]
        if running or self._own_zookeeper_alive() or self._any_service_alive():
            raise ClusterError(f"a cluster is already running in {self.dir}; run `down` first")
        try:
            self.start_zookeeper(timeout)
            if before_brokers is not None:
                before_brokers()
            for b in self.brokers:         # launch all, then wait: start-ups overlap
                b.launch()
            self.save_state()
            for b in self.brokers:
                b.wait_ready(timeout, need_controller=False)
            self.wait_for_controller(timeout)
            self.wait_for_full_view(timeout)
            self.start_registry(timeout)
            self.start_connect(timeout)
            self.start_sql(timeout)
            self.start_console(timeout)
        except BaseException:
            self.down()
            raise
        self.save_state()
        return self

    def start_registry(self, timeout: float = 90.0) -> None:
        """Start the schema registry (if the cluster has one) against the running brokers and wait
        until it answers and knows its primary (itself), so writes succeed at once; its first
        start creates ``_schemas`` (RF min(3, brokers))."""
        if self.registry is None:
            return
        self.registry.bootstrap = self.bootstrap
        self.registry.launch()
        self.save_state()
        self.registry.wait_ready(timeout, need_primary=True)

    def start_connect(self, timeout: float = 90.0) -> None:
        """Start the Connect workers (clients of the brokers: after them) and wait until each has
        read its topics and joined the group (``/health`` answers 200)."""
        for w in self.connect:
            w.bootstrap = self.bootstrap
            w.overrides.setdefault("config.storage.replication.factor", str(min(3, len(self.brokers))))
            w.overrides.setdefault("offset.storage.replication.factor", str(min(3, len(self.brokers))))
            w.overrides.setdefault("status.storage.replication.factor", str(min(3, len(self.brokers))))
            w.launch()
        self.save_state()
        for w in self.connect:
            w.wait_ready(timeout)
    def start_sql(self, timeout: float = 90.0) -> None:
        """Start the SQL server (if the cluster has one; a client of the brokers and the registry)
        and wait until it has replayed its command topic and serves."""
        if self.sql is None:
            return
        self.sql.bootstrap = self.client_bootstrap
        self.sql.security = dict(self.client_security)
        self.sql.registry_url = self.registry.url if self.registry is not None else None
        self.sql.launch()
        self.save_state()
        self.sql.wait_ready(timeout)

    def services(self) -> list[tuple[str, HttpServiceProcess]]:
        """The HTTP services around the brokers, named for the user, in the order ``down`` stops
        them (the clients of the others first)."""
        named: list[tuple[str, HttpServiceProcess | None]] = [
            ("console", self.console), *((f"connect worker {w.url}", w) for w in self.connect),
            ("SQL server", self.sql), ("schema registry", self.registry)]
        return [(name, svc) for name, svc in named if svc is not None]

    def _any_service_alive(self) -> bool:
        return any(svc.alive for _, svc in self.services())

    def start_console(self, timeout: float = 90.0) -> None:
        """Start the web console (if the cluster has one) against the running brokers (their
        /metrics too), ZooKeeper and the registry, and wait until it serves."""
        if self.console is None:
            return
        self.console.bootstrap = self.bootstrap
        self.console.registry_url = self.registry.url if self.registry is not None else None
        self.console.metrics_urls = [b.metrics_url for b in self.brokers if b.metrics_url]
        self.console.zookeeper = self.zk_connect
        if self.connect and "--connect-url" not in self.console.extra_args:
            self.console.extra_args += ["--connect-url", self.connect[0].url]      # its Connect page
        self.console.launch()
        self.save_state()
        self.console.wait_ready(timeout)

    def start_zookeeper(self, timeout: float = 90.0) -> None:
        """Start our ZooKeeper servers (if ours) and wait for a quorum with one leader; the state
        file records them before the wait, so a failure or an interrupt leaves them findable."""
        if self.ensemble is None:
            return
        self.ensemble.launch()
        self.save_state()
        self.ensemble.wait_ready(timeout)
        self.save_state()

    def wait_for_controller(self, timeout: float = 60.0) -> int:
        """The id of the controller once ``/controller`` names a live broker of ours."""
        live = {b.broker_id for b in self.brokers if b.alive}

        def elected() -> tuple[int] | None:
            cid = self.controller_id()
            # a tuple, so that broker id 0 is "elected" too (wait_until tests truthiness)
            return (cid,) if cid is not None and cid in live else None
        return wait_until(elected, timeout, "a controller to be elected")[0]

    #: False for brokers the project's client cannot ask (the benchmark's Kafka 0.9.0.1 has no ApiVersions)
    check_full_view = True

    def wait_for_full_view(self, timeout: float = 60.0) -> None:
        """Until every live broker's Metadata names a live controller and every live broker.

        ``/controller`` alone is not enough: each broker's metadata cache learns of it through its
        own watch a moment later, and librdkafka's admin client, told "no controller" by its first
        Metadata answer, only waits for a broker state change that may not come before its request
        times out (a CreateTopics right after ``up`` hung for 60 s once). Registration alone let a
        first CreateTopics with RF = cluster size reach a controller that had not yet seen the last
        broker (INVALID_REPLICATION_FACTOR). A broker with no PLAINTEXT listener is not asked."""
        live = {b.broker_id for b in self.brokers if b.alive}
        askable = [b for b in self.brokers if b.alive and b.port and b.port > 0]
        if not self.check_full_view:
            return
        from kafkalite.client import KafkaClient

        def sees_all(broker: BrokerProcess) -> bool:
            try:
                with KafkaClient(broker.bootstrap, client_id="kafkalite-cluster", retries=0) as client:
                    view = client.metadata([])
            except Exception:  # noqa: BLE001 - not answering yet: ask again
                return False
            return view.controller_id in live and live <= set(view.brokers)
        for b in askable:
            wait_until(lambda: sees_all(b), timeout,
                       f"broker {b.broker_id}'s metadata to name the controller and every broker", interval=0.1)

    # -- ZooKeeper servers ----------------------------------------------------------------
    def zookeeper_server(self, server_id: int) -> ZooKeeperProcess:
        if self.ensemble is None:
            raise ClusterError("this cluster uses an external ZooKeeper: it has no server to stop or start")
        return self.ensemble.server(server_id)

    def kill_zookeeper(self, server_id: int) -> int:
        """kill -9 one of our ZooKeeper servers; returns its pid."""
        self.zookeeper_server(server_id)
        assert self.ensemble is not None
        pid = self.ensemble.kill_server(server_id)
        self.save_state()
        return pid

    def start_zookeeper_server(self, server_id: int, timeout: float = 60.0) -> ZooKeeperProcess:
        """Start one of our stopped ZooKeeper servers again; returns once it serves in a quorum."""
        self.zookeeper_server(server_id)
        assert self.ensemble is not None
        try:
            server = self.ensemble.start_server(server_id, timeout)
        finally:
            self.save_state()
        return server

    def start_broker(self, broker_id: int, timeout: float = 90.0) -> BrokerProcess:
        b = self.broker(broker_id)
        if b.alive:
            raise ClusterError(f"broker {broker_id} is already running (pid {b.pid})")
        try:
            b.launch()
            self.save_state()
            b.wait_ready(timeout)
        except BaseException:
            b.kill()
            self.save_state()
            raise
        self.save_state()
        return b

    def add_new_broker(self, port: int = 0, timeout: float = 90.0) -> BrokerProcess:
        """Start one more broker with the next id (highest id + 1) and the same properties as the
        first broker, and record it in the state file (``kafkalite-cluster add-broker``). It
        holds no partitions until a reassignment moves some onto it."""
        if not self.brokers:
            raise ClusterError("the cluster has no broker to copy the settings from")
        if port and port_in_use(port):
            raise ClusterError(f"port 127.0.0.1:{port} is already in use")
        template = self.brokers[0]
        new_id = max(b.broker_id for b in self.brokers) + 1
        broker = self.add_broker(new_id, dict(template.overrides), port,
                                 metrics_port=free_port() if template.metrics_port else 0)
        # add_broker layers the defaults under the overrides; a loaded cluster has size 0, so
        # take the first broker's properties as they are
        broker.overrides = dict(template.overrides)
        self.save_state()
        return self.start_broker(new_id, timeout)

    def kill_broker(self, broker_id: int) -> int:
        """kill -9: no deregistration, no clean-shutdown marker (the session expires later)."""
        b = self.broker(broker_id)
        if not b.alive:
            raise ClusterError(f"broker {broker_id} is not running")
        pid = b.pid
        b.kill()
        self.save_state()
        assert pid is not None
        return pid

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> int | None:
        b = self.broker(broker_id)
        rc = b.stop(timeout)
        self.save_state()
        return rc

    def replication_lag(self, broker_id: int | None = None) -> list[PartitionStatus]:
        """Partitions that are under-replicated in ZooKeeper (ISR shorter than the replica list),
        plus, with ``broker_id``, those listing it as a replica but not (yet) in their ISR: the
        partitions a rolling restart must wait for before it stops the next broker."""
        st = self.status()
        if not st.zookeeper_alive:
            raise ClusterError("ZooKeeper has no quorum: cannot tell which partitions are replicated")
        out = []
        for p in st.partitions:
            if p.under_replicated or (broker_id is not None and broker_id in p.replicas
                                      and broker_id not in p.isr):
                out.append(p)
        return out

    def wait_replicated(self, timeout: float, broker_id: int | None = None) -> None:
        """Wait until no partition is under-replicated (and ``broker_id`` is back in every ISR it
        belongs to); the error names a few partitions still missing replicas."""
        deadline = time.monotonic() + timeout
        while True:
            lagging = self.replication_lag(broker_id)
            if not lagging:
                return
            if time.monotonic() >= deadline:
                names = ", ".join(f"{p.topic}-{p.partition} (isr {p.isr} of {p.replicas})" for p in lagging[:3])
                more = f" and {len(lagging) - 3} more" if len(lagging) > 3 else ""
                raise ClusterError(f"{len(lagging)} partition(s) still under-replicated after {timeout:.0f} s: "
                                   f"{names}{more}")
            time.sleep(0.1)

    def restart_order(self) -> list[BrokerProcess]:
        """The brokers in id order with the controller last, as Kafka operators roll a cluster:
        the controller moves once, not once per restarted broker."""
        cid = self.controller_id()
        return sorted(self.brokers, key=lambda b: (b.broker_id == cid, b.broker_id))

    def rolling_restart(self, timeout: float = 120.0,
                        progress: Callable[[str], None] | None = None) -> list[int]:
        """Restart every broker, one at a time: SIGTERM (the broker's controlled shutdown moves its
        leaderships away and leaves every ISR), wait for it to exit, start it again, wait until it
        is registered in this incarnation and no partition is under-replicated, then the next.
        ``timeout`` bounds each step of each broker. Refuses to start while a broker is down or a
        partition is under-replicated (a restart would then take a partition below its ISR).
        Returns the broker ids in the order restarted."""
        say = progress or (lambda _msg: None)
        dead = [b.broker_id for b in self.brokers if not b.alive]
        if dead:
            raise ClusterError(f"broker(s) {', '.join(map(str, dead))} not running: start them before a rolling restart")
        if not self.brokers:
            raise ClusterError("the cluster has no brokers")
        self.wait_replicated(timeout)
        done = []
        for b in self.restart_order():
            started = time.monotonic()
            say(f"broker {b.broker_id}: controlled shutdown (SIGTERM, pid {b.pid})")
            b.terminate()
            if not b.wait(timeout):
                raise ClusterError(f"broker {b.broker_id} did not stop within {timeout:.0f} s of SIGTERM "
                                   f"(pid {b.pid} left running); see {b.log_path}")
            self.save_state()
            try:
                b.launch()
                self.save_state()
                b.wait_ready(timeout)
            except BaseException:
                self.save_state()
                raise
            self.save_state()
            say(f"broker {b.broker_id}: back on {b.bootstrap} (pid {b.pid}), waiting for its replicas to rejoin the ISRs")
            self.wait_replicated(timeout, b.broker_id)
            say(f"broker {b.broker_id}: done in {time.monotonic() - started:.1f} s, no partition under-replicated")
            done.append(b.broker_id)
        return done

    def down(self, timeout: float = 30.0) -> list[str]:
        """Stop everything (idempotent); returns what was stopped, for the user."""
        stopped: list[str] = []
        live_services = [(label, svc) for label, svc in self.services() if svc.alive]
        for _, svc in live_services:       # clients of the brokers: SIGTERM lets them leave their groups
            svc.terminate()
        for label, svc in live_services:
            if svc.wait(timeout):
                stopped.append(label)
            else:
                svc.kill()
                stopped.append(f"{label} (killed after {timeout:.0f} s)")
        live = [b for b in self.brokers if b.alive]
        for b in live:
            b.terminate()
        for b in live:
            if not b.wait(timeout):
                b.kill()
                stopped.append(f"broker {b.broker_id} (killed after {timeout:.0f} s)")
            else:
                stopped.append(f"broker {b.broker_id}")
        self.close_zk()
        if self.ensemble is not None:
            ids = self.ensemble.stop()
            if ids and self.ensemble.size == 1:
                stopped.append("zookeeper")
            elif ids:
                stopped.append(f"zookeeper {', '.join(map(str, ids))}")
        if self.state_path.parent.exists():
            self.save_state()
        return stopped

    def _own_zookeeper_alive(self) -> bool:
        return self.ensemble is not None and self.ensemble.alive

    def delete_data(self) -> None:
        if any(b.alive for b in self.brokers) or self._own_zookeeper_alive() or self._any_service_alive():
            raise ClusterError("refusing to delete the data of a running cluster")
        shutil.rmtree(self.dir, ignore_errors=True)

    def leftover_ports(self) -> list[int]:
        """Ports of this cluster that still accept connections (should be none after ``down``)."""
        ports = [b.configured_port or b.port for b in self.brokers]
        if self.ensemble is not None:
            ports += self.ensemble.ports
        ports += [svc.port for _, svc in self.services()]
        return [p for p in ports if p and port_in_use(p)]

    # -- status ---------------------------------------------------------------------------
    def status(self) -> ClusterStatus:
        servers: list[ZooKeeperServerStatus] = []
        zk_serving = True
        if self.ensemble is not None:
            modes = self.ensemble.modes()
            servers = [ZooKeeperServerStatus(s.server_id, modes[s.server_id], s.pid if s.alive else None, s.port)
                       for s in self.ensemble.servers if s.server_id is not None]
            # without a quorum no server answers: do not wait for a session that cannot come
            zk_serving = self.ensemble.has_quorum(modes)
        elif isinstance(self.zookeeper, ZooKeeperProcess):
            zk_serving = self.zookeeper.alive
        st = ClusterStatus(zk_serving, {b.broker_id: (b.alive, b.pid if b.alive else None, b.port)
                                        for b in self.brokers}, servers)
        if self.registry is not None:
            alive = self.registry.alive and self.registry.answers()
            st.schema_registry = (alive, self.registry.pid if self.registry.alive else None, self.registry.url)
        if self.console is not None:
            st.console = (self.console.alive and self.console.answers(),
                          self.console.pid if self.console.alive else None, self.console.url)
        if not zk_serving:
            return st
        st.registered = self.registered_ids()
        st.controller = self.controller_id()
        for topic in sorted(self.zk_children("/brokers/topics")):
            data = self.zk_get(f"/brokers/topics/{topic}")
            if data is None:
                continue
            assignment = json.loads(data).get("partitions", {})
            for p, replicas in sorted(assignment.items(), key=lambda kv: int(kv[0])):
                state = self.zk_get(f"/brokers/topics/{topic}/partitions/{p}/state")
                leader, isr = (-1, [])
                if state is not None:
                    s = json.loads(state)
                    leader, isr = s["leader"], s["isr"]
                st.partitions.append(PartitionStatus(topic, int(p), list(replicas), leader, list(isr)))
        return st

    # -- state file -----------------------------------------------------------------------
    def save_state(self) -> None:
        state = {
            "version": STATE_VERSION,
            "chroot": self.chroot,
            "external_zookeeper": self.external_zk,
            "overrides": self.overrides,
            "zookeeper": self.ensemble.record() if self.ensemble is not None else None,
            "brokers": [{"id": b.broker_id, "port": b.configured_port, "bound_port": b.port,
                         "metrics_port": b.metrics_port,
                         "overrides": b.overrides, **b.record()} for b in self.brokers],
            "schema_registry": None if self.registry is None else
            {"port": self.registry.port, "bootstrap": self.registry.bootstrap, **self.registry.record()},
            "connect": [{"port": w.port, "bootstrap": w.bootstrap, "name": w.dir.name, **w.record()}
                        for w in self.connect],
            "console": None if self.console is None else {"port": self.console.port, **self.console.record()},
            "sql": None if self.sql is None else {"port": self.sql.port, "bootstrap": self.sql.bootstrap,
                                                  "registry_url": self.sql.registry_url, **self.sql.record()},
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_path)

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str]) -> "LocalCluster":
        """Re-attach to the cluster whose state file is in ``data_dir``."""
        path = Path(data_dir).resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {path.parent} (no {STATE_FILE}); start one with `up`") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"unreadable state file {path}: {exc}") from None
        zk = state.get("zookeeper")
        try:
            ensemble = ZooKeeperEnsemble.attach(path.parent, zk) if zk else None
        except (KeyError, TypeError, ValueError) as exc:
            raise ClusterError(f"unreadable state file {path}: bad zookeeper entry ({exc})") from None
        cluster = cls(path.parent, size=0, overrides=state.get("overrides"),
                      zookeeper_connect=None if ensemble is not None else state.get("external_zookeeper"),
                      chroot=state.get("chroot", ""), ensemble=ensemble)
        for rec in state["brokers"]:
            b = cluster.broker_class(cluster, rec["id"], rec.get("overrides"), rec.get("port", 0),
                                     rec.get("metrics_port", 0))
            b.port = rec.get("bound_port") or rec.get("port") or None
            b.attach(rec)
            cluster.brokers.append(b)
        reg = state.get("schema_registry")
        if reg:
            cluster.registry = SchemaRegistryProcess(cluster.dir, reg.get("bootstrap", ""), int(reg["port"]),
                                                     name=REGISTRY_DIR)
            cluster.registry.attach(reg)
        for rec in state.get("connect") or []:
            w = ConnectWorkerProcess(cluster.dir, rec.get("bootstrap", ""), int(rec["port"]),
                                     name=rec.get("name", "connect"))
            w.attach(rec)
            cluster.connect.append(w)
        sql = state.get("sql")
        if sql:
            cluster.sql = SqlServerProcess(cluster.dir, sql.get("bootstrap", ""), int(sql["port"]),
                                           registry_url=sql.get("registry_url"))
            cluster.sql.attach(sql)
        con = state.get("console")
        if con:
            cluster.console = ConsoleProcess(cluster.dir, cluster.bootstrap if cluster.brokers else "", int(con["port"]),
                                             name=CONSOLE_DIR)
            cluster.console.attach(con)
        return cluster
