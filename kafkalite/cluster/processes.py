"""The processes of a local cluster: ZooKeeper JVMs (one, or an ensemble) and kafkalite brokers.

A process is known either as a child we started (a ``Popen``) or, for a later command of the
``kafkalite-cluster`` tool, by the pid and kernel start time recorded in the cluster's state file.
The start time guards against pid reuse: a recorded pid whose ``/proc/<pid>/stat`` start time
differs is someone else's process and is never signalled. Zombies count as dead (a detached
broker whose parent exited may linger as a zombie until init reaps it; it holds no ports).
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Self, Sequence

ZK_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_JAR = "/usr/share/java/slf4j-simple.jar"
ZK_JVM_OPTS = ["-Xms16m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
#: Ensemble sizes the launcher runs: one server, or an odd number so that a majority survives
#: the loss of one (3) or two (5) servers.
ENSEMBLE_SIZES = (1, 3, 5)
#: What ``srvr`` says a server is doing once it serves clients (an ensemble member serves only
#: while a quorum has elected a leader).
SERVING_MODES = ("leader", "follower", "standalone", "observer")


class ClusterError(RuntimeError):
    """A local-cluster operation failed; str() is meant for the user (one line, then a log tail)."""


#: ports this process handed out lately (host, port), newest last: the kernel considers a port
#: free again as soon as our probe socket closes, though the process it was chosen for may not
#: have bound it yet (a ZooKeeper election port and a schema registry once got the same one)
_HANDED_OUT: dict[tuple[str, int], None] = {}
_REMEMBERED = 4096
#: the lowest port handed out: above the registered services most machines run
_LOWEST_PORT = 10000
#: where the kernel keeps its ephemeral range (Linux)
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.Random()


def unassigned_port_range() -> range:
    """Ports the kernel never picks by itself: below (or else above) its ephemeral range.

    A port chosen by binding to 0 lies in the ephemeral range, which is also where every outgoing
    connection takes its local port; in the seconds between choosing a broker's port and the broker
    binding it, a client connecting anywhere could take it (CI once saw a broker fail with "Address
    already in use" that way). Outside that range only another process choosing at random could."""
    try:
        low, high = (int(n) for n in _EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return range(0)
    if low - _LOWEST_PORT >= 4096:
        return range(_LOWEST_PORT, low)
    if 65536 - (high + 1) >= 4096:
        return range(high + 1, 65536)
    return range(0)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, outside the kernel's ephemeral range when it can be, and not handed out
    lately by this process. Another process may still take it before we do; starting on a taken
    port fails loudly, never silently."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that are free now and not handed out lately by this process
    (see :func:`unassigned_port_range` for where they come from). Each probe binds without
    ``SO_REUSEADDR``, so a port with connections still in TIME_WAIT is passed over. All probe
    sockets stay bound until every port is chosen (same caveat as :func:`free_port`)."""
    candidates = unassigned_port_range()
    with ExitStack() as stack:
        ports: list[int] = []
        attempts = 0
        while len(ports) < count:
            s = stack.enter_context(socket.socket())
            attempts += 1
            # after many taken candidates (a crowded range) fall back to the kernel's choice
            wanted = _random.choice(candidates) if candidates and attempts <= 64 * count else 0
            try:
                s.bind((host, wanted))
            except OSError:
                continue
            port = s.getsockname()[1]
            if (host, port) not in _HANDED_OUT and port not in ports:
                ports.append(port)
    for port in ports:
        _HANDED_OUT[(host, port)] = None
    while len(_HANDED_OUT) > _REMEMBERED:
        del _HANDED_OUT[next(iter(_HANDED_OUT))]
    return ports


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def four_letter(cmd: str, port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word and return the whole reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def proc_start_ticks(pid: int) -> int | None:
    """The kernel start time of ``pid`` (clock ticks since boot), None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):          # zombie or dead: exited, only not reaped yet
        return None
    return int(fields[19])               # field 22 of stat(5); fields[0] is field 3


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """``props`` as a Java properties file at ``path`` (the form every kafkalite service reads)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class Process:
    """One OS process we manage: started here (``proc``) or re-attached from a state file."""

    #: the process's own directory, and the names of its log and properties files in it
    dir: Path
    log_name = ""
    properties_name = ""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.recorded_pid: int | None = None
        self.recorded_start: int | None = None

    # -- identity -------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else self.recorded_pid

    @property
    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        if self.recorded_pid is None:
            return False
        ticks = proc_start_ticks(self.recorded_pid)
        return ticks is not None and ticks == self.recorded_start

    def record(self) -> dict[str, int | None]:
        pid = self.pid if self.alive else None
        return {"pid": pid, "start": proc_start_ticks(pid) if pid else None}

    def attach(self, rec: dict[str, Any]) -> None:
        self.proc = None
        self.recorded_pid = rec.get("pid")
        self.recorded_start = rec.get("start")

    def _spawn(self, cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            # A session of its own: Ctrl-C in the terminal of `kafkalite-cluster up` (or of a
            # test run) does not reach it; only our stop/kill does.
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True, preexec_fn=raise_open_files_limit)
        self.recorded_pid, self.recorded_start = self.proc.pid, proc_start_ticks(self.proc.pid)

    # -- signals --------------------------------------------------------------------------
    def _signal(self, sig: int) -> None:
        if self.alive and self.pid is not None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> bool:
        """Wait until the process is gone; True if it is."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL (kill -9) and wait until it is gone."""
        self._signal(signal.SIGKILL)
        self.wait(10)

    # -- start-up -------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        if not self.log_name:
            raise NotImplementedError
        return self.dir / self.log_name

    @property
    def properties_path(self) -> Path:
        if not self.properties_name:
            raise NotImplementedError
        return self.dir / self.properties_name

    def launch(self) -> None:
        raise NotImplementedError

    def wait_ready(self, timeout: float = 60.0) -> None:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> Self:
        """Launch and wait until ready; a process that does not get there is killed (kill -9)."""
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait ``timeout``, then SIGKILL. Returns the exit code when known."""
        if self.alive:
            self.terminate()
            if not self.wait(timeout):
                self.kill()
                return None
        return self.proc.returncode if self.proc is not None else None


@dataclass(frozen=True)
class QuorumPeer:
    """One server of a ZooKeeper ensemble: its ``myid`` and its three ports (clients, followers
    to the leader, leader election), as the ``server.N=host:peer:election`` line of zoo.cfg."""

    server_id: int
    client_port: int
    peer_port: int = 0
    election_port: int = 0
    host: str = "127.0.0.1"

    @property
    def server_line(self) -> str:
        return f"server.{self.server_id}={self.host}:{self.peer_port}:{self.election_port}"


class ZooKeeperProcess(Process):
    """Debian's ZooKeeper jar run as a plain JVM (as ``scripts/zookeeper-server-start`` does).

    Ready when ``srvr`` reports a mode *and* ``conf`` shows our own dataDir, so a foreign server
    on the same port is never mistaken for ours (``ruok`` answers before it serves requests).
    A member of an ensemble (``quorum``: every server's :class:`QuorumPeer`, ``server_id``: ours,
    written to ``<dataDir>/myid``) reports a mode only while a quorum has a leader, so its
    readiness is "leader" or "follower".

    ``host`` is where clients (and the readiness probe) reach it; it listens there only, unless
    ``listen_address`` says otherwise (``0.0.0.0``: every address, e.g. a bridge that brokers in
    network namespaces reach it through).
    """

    def __init__(self, workdir: str | os.PathLike[str], port: int = 0, tick_ms: int = 2000,
                 host: str = "127.0.0.1", log_path: Path | None = None,
                 listen_address: str | None = None, server_id: int | None = None,
                 quorum: Sequence[QuorumPeer] = ()) -> None:
        super().__init__()
        self.dir = Path(workdir).resolve()
        self.port = port or free_port(host)
        self.host = host
        self.listen_address = listen_address or host
        self.tick_ms = tick_ms
        self._log_path = log_path or self.dir / "zookeeper.log"
        self.quorum = tuple(quorum)
        self.server_id = server_id
        if self.quorum and self.peer is None:
            raise ValueError(f"server id {server_id} is not one of the quorum's servers")

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def peer(self) -> QuorumPeer | None:
        """Our own entry of the quorum (None for a standalone server)."""
        return next((q for q in self.quorum if q.server_id == self.server_id), None)

    @property
    def ports(self) -> list[int]:
        """Every port this server listens on (the client port; in an ensemble also its quorum
        and election ports)."""
        peer = self.peer
        return [self.port] + ([peer.peer_port, peer.election_port] if peer is not None else [])

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def config_path(self) -> Path:
        return self.dir / "zoo.cfg"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"tickTime={self.tick_ms}", f"dataDir={self.data_dir}", f"clientPort={self.port}",
                 f"clientPortAddress={self.listen_address}", "maxClientCnxns=0", "admin.enableServer=false",
                 "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf"]
        if self.quorum:
            # followers get initLimit ticks to sync with a new leader and are dropped after
            # syncLimit ticks of silence (ZooKeeper's sample values)
            lines += ["initLimit=10", "syncLimit=5", *(q.server_line for q in self.quorum)]
            (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def command(self) -> list[str]:
        return ["java", *ZK_JVM_OPTS, "-cp", f"{ZK_JAR}:{SLF4J_JAR}",
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.config_path)]

    def mode(self) -> str:
        """What this server does now: ``leader``/``follower``/``standalone`` (serving clients),
        ``not serving`` (running, but an ensemble member without a quorum, or still starting),
        or ``down`` (no process, or the port answers for someone else's server)."""
        if not self.alive:
            return "down"
        try:
            reply = four_letter("srvr", self.port, self.host)
        except OSError:
            return "not serving"
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                mode = line.split(":", 1)[1].strip()
                return mode if self.is_ours() else "down"
        return "not serving"

    def is_ours(self) -> bool:
        """``conf`` on our port shows our dataDir (not a foreign server that took the port)."""
        try:
            return f"dataDir={self.data_dir}/version-2" in four_letter("conf", self.port, self.host)
        except OSError:
            return False

    def is_ready(self) -> bool:
        """Our process serves clients (in an ensemble: as leader or follower of a quorum)."""
        return self.mode() in SERVING_MODES

    def launch(self) -> None:
        """Spawn the JVM without waiting (see :meth:`wait_ready`)."""
        check_zookeeper_installed()
        for port in self.ports:
            if port_in_use(port, self.host):
                raise ClusterError(f"ZooKeeper{self._name()} port {self.host}:{port} is already in use")
        self.write_config()
        self._spawn(self.command(), self.log_path)

    def _name(self) -> str:
        return f" server {self.server_id}" if self.quorum else ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise ClusterError(f"ZooKeeper{self._name()} exited during start-up (port {self.hosts} taken?); "
                                   f"see {self.log_path}:\n{tail(self.log_path)}")
            if self.is_ready():
                return
            time.sleep(0.05)
        raise ClusterError(f"ZooKeeper{self._name()} not serving on {self.hosts} after {timeout:.0f} s; "
                           f"see {self.log_path}")

    def start(self, timeout: float = 60.0) -> "ZooKeeperProcess":
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop(10)
            raise
        return self

    def pause(self) -> None:
        """SIGSTOP the JVM (clients go SUSPENDED)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self, timeout: float = 10.0) -> int | None:
        self._signal(signal.SIGCONT)     # a stopped JVM cannot act on SIGTERM
        return super().stop(timeout)

    def terminate(self) -> None:
        self._signal(signal.SIGCONT)
        super().terminate()


def check_zookeeper_installed() -> None:
    """ClusterError (one line, what to install) unless the ZooKeeper jars and java are there."""
    for path in (ZK_JAR, SLF4J_JAR):
        if not os.path.exists(path):
            raise ClusterError(f"{path} not found: install Debian's zookeeper package (bash scripts/setup)")
    if not any(os.access(os.path.join(d, "java"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep)):
        raise ClusterError("java not found on PATH: install openjdk-17-jre-headless (bash scripts/setup)")


class ZooKeeperEnsemble:
    """The ZooKeeper servers of one local cluster: a standalone server, or an ensemble of 3 or 5.

    Each server has its own directory (``zookeeper/`` for a standalone server, ``zookeeper-<myid>/``
    in an ensemble) with its zoo.cfg, dataDir (holding ``myid``) and log, and its own ports, all
    chosen free by the launcher (or the client ports from ``client_port``, ``client_port + 1``,
    ...); they stay the server's for the life of the directory, so a restarted server rejoins with
    the same ``server.N`` line and clients keep a valid connect string.

    Ready means what ZooKeeper says: every server (of those meant to run) reports a serving mode
    with our dataDir, and the ensemble has a quorum with exactly one leader.
    """

    def __init__(self, workdir: str | os.PathLike[str], size: int = 1, tick_ms: int = 2000,
                 host: str = "127.0.0.1", client_port: int = 0,
                 peers: Sequence[QuorumPeer] | None = None) -> None:
        self.dir = Path(workdir).resolve()
        self.tick_ms = tick_ms
        self.host = host
        if peers is None:
            if size not in ENSEMBLE_SIZES:
                raise ClusterError(f"a ZooKeeper ensemble has {', '.join(map(str, ENSEMBLE_SIZES[:-1]))} "
                                   f"or {ENSEMBLE_SIZES[-1]} servers (a majority must survive a failure), not {size}")
            peers = self.choose_ports(size, client_port, host)
        self.peers = tuple(peers)
        standalone = len(self.peers) == 1
        self.servers = [ZooKeeperProcess(self.server_dir(p.server_id, standalone), p.client_port, tick_ms, host,
                                         server_id=p.server_id, quorum=() if standalone else self.peers)
                        for p in self.peers]

    @staticmethod
    def choose_ports(size: int, client_port: int, host: str) -> list[QuorumPeer]:
        """Free ports for ``size`` servers: a client port each (from ``client_port`` on when given)
        and, in an ensemble, a quorum and an election port each; never ZooKeeper's fixed ones."""
        if size == 1:
            return [QuorumPeer(1, client_port or free_port(host), host=host)]
        free = free_ports(3 * size, host)
        return [QuorumPeer(i + 1, client_port + i if client_port else free[3 * i], free[3 * i + 1], free[3 * i + 2], host)
                for i in range(size)]

    def server_dir(self, server_id: int, standalone: bool) -> Path:
        return self.dir / ("zookeeper" if standalone else f"zookeeper-{server_id}")

    # -- identity ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.servers)

    @property
    def hosts(self) -> str:
        """The client connect string: every server's host:port (Kafka's multi-host zookeeper.connect)."""
        return ",".join(s.hosts for s in self.servers)

    @property
    def quorum_size(self) -> int:
        return self.size // 2 + 1

    @property
    def ports(self) -> list[int]:
        return [p for s in self.servers for p in s.ports]

    def server(self, server_id: int) -> ZooKeeperProcess:
        for s in self.servers:
            if s.server_id == server_id:
                return s
        raise ClusterError(f"no ZooKeeper server {server_id} (servers: "
                           f"{', '.join(str(s.server_id) for s in self.servers)})")

    @property
    def alive(self) -> bool:
        """True if any server process is running (something to stop)."""
        return any(s.alive for s in self.servers)

    # -- what the servers say ---------------------------------------------------------------
    def modes(self) -> dict[int, str]:
        """Server id -> ``leader``/``follower``/``standalone``/``not serving``/``down``."""
        return {s.server_id: s.mode() for s in self.servers if s.server_id is not None}

    def leader(self) -> int | None:
        """The id of the server that leads the ensemble (a standalone server leads itself)."""
        for sid, mode in self.modes().items():
            if mode in ("leader", "standalone"):
                return sid
        return None

    def has_quorum(self, modes: dict[int, str] | None = None) -> bool:
        """A majority of the servers serve clients, one of them as leader (or the standalone one)."""
        modes = self.modes() if modes is None else modes
        serving = [m for m in modes.values() if m in SERVING_MODES]
        leaders = [m for m in serving if m in ("leader", "standalone")]
        return len(serving) >= self.quorum_size and len(leaders) == 1

    # -- lifecycle ---------------------------------------------------------------------------
    def launch(self) -> None:
        """Spawn every server without waiting (see :meth:`wait_ready`); on a failure the servers
        spawned so far are stopped again."""
        check_zookeeper_installed()
        for port in self.ports:           # every port checked before anything starts
            if port_in_use(port, self.host):
                raise ClusterError(f"ZooKeeper port {self.host}:{port} is already in use")
        try:
            for s in self.servers:
                s.launch()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float = 60.0, servers: Iterable[int] | None = None) -> int:
        """Wait until ``servers`` (default: all) serve and the ensemble has a quorum with one
        leader; returns the leader's id. A server that exits meanwhile fails at once."""
        wanted = [self.server(i) for i in servers] if servers is not None else list(self.servers)
        deadline = time.monotonic() + timeout
        while True:
            for s in wanted:
                if not s.alive:
                    raise ClusterError(f"ZooKeeper server {s.server_id} exited during start-up (a port taken?); "
                                       f"see {s.log_path}:\n{tail(s.log_path)}")
            modes = self.modes()
            if all(modes[s.server_id] in SERVING_MODES for s in wanted if s.server_id is not None) \
                    and self.has_quorum(modes):
                leader = next(i for i, m in modes.items() if m in ("leader", "standalone"))
                return leader
            if time.monotonic() >= deadline:
                shown = ", ".join(f"{i}: {m}" for i, m in modes.items())
                raise ClusterError(f"ZooKeeper ensemble not serving after {timeout:.0f} s ({shown}); "
                                   f"see {wanted[0].log_path}")
            time.sleep(0.05)

    def start(self, timeout: float = 60.0) -> "ZooKeeperEnsemble":
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_server(self, server_id: int, timeout: float = 60.0) -> ZooKeeperProcess:
        """Start one stopped server again (same ports, same dataDir) and wait until it serves
        within a quorum: it rejoins as a follower, or completes a quorum that had none."""
        s = self.server(server_id)
        if s.alive:
            raise ClusterError(f"ZooKeeper server {server_id} is already running (pid {s.pid})")
        s.launch()
        try:
            self.wait_ready(timeout, [server_id])
        except BaseException:
            s.kill()
            raise
        return s

    def kill_server(self, server_id: int) -> int:
        """kill -9 one server; returns its pid."""
        s = self.server(server_id)
        if not s.alive:
            raise ClusterError(f"ZooKeeper server {server_id} is not running")
        pid = s.pid
        s.kill()
        assert pid is not None
        return pid

    def stop(self, timeout: float = 10.0) -> list[int]:
        """SIGTERM to every running server at once, SIGKILL after ``timeout``; returns the ids stopped."""
        live = [s for s in self.servers if s.alive]
        for s in live:
            s.terminate()
        deadline = time.monotonic() + timeout
        for s in live:
            if not s.wait(max(deadline - time.monotonic(), 0.0)):
                s.kill()
        return [s.server_id for s in live if s.server_id is not None]

    # -- state file -------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        return {"tick_ms": self.tick_ms,
                "servers": [{"id": p.server_id, "port": p.client_port, "peer_port": p.peer_port,
                             "election_port": p.election_port, **s.record()}
                            for p, s in zip(self.peers, self.servers)]}

    @classmethod
    def attach(cls, workdir: str | os.PathLike[str], rec: dict[str, Any]) -> "ZooKeeperEnsemble":
        """The ensemble a state file describes, its servers re-attached by pid and start time.
        A version-1 record (``{"port", "pid", "start"}``) is one standalone server."""
        servers = rec.get("servers") or [{"id": 1, **rec}]
        peers = [QuorumPeer(int(r["id"]), int(r["port"]), int(r.get("peer_port") or 0),
                            int(r.get("election_port") or 0)) for r in servers]
        ensemble = cls(workdir, tick_ms=int(rec.get("tick_ms", 2000)), peers=peers)
        for s, r in zip(ensemble.servers, servers):
            s.attach(r)
        return ensemble


class BrokerHost(Protocol):
    """What a broker needs from the cluster it belongs to."""

    dir: Path

    @property
    def zk_connect(self) -> str: ...

    def zk_get(self, path: str) -> bytes | None: ...


#: Open files a broker or ZooKeeper we start may hold: a replica keeps its segment's log and
#: index files open (Kafka's docs ask operators for 100,000 or more; 10,000 partitions at RF 3 on
#: 3 brokers need about 30,000 per broker).
OPEN_FILES_WANTED = 1 << 20


def raise_open_files_limit() -> None:
    """In the child before exec: lift RLIMIT_NOFILE toward :data:`OPEN_FILES_WANTED`, the hard
    limit too where we may (root), else the soft limit up to the hard one."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with open("/proc/sys/fs/nr_open") as f:
            ceiling = min(OPEN_FILES_WANTED, int(f.read()))
    except (OSError, ValueError):
        ceiling = OPEN_FILES_WANTED
    for limits in ((ceiling, max(hard, ceiling)), (hard, hard)):
        if limits[0] <= soft:
            return
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            return
        except (OSError, ValueError):
            continue


class BrokerProcess(Process):
    """One ``kafkalite-server`` process.

    Started means: its ephemeral ``/brokers/ids/<id>`` exists with a registration written by
    *this* incarnation (after a kill -9 the old znode lingers until its session expires; its
    timestamp predates our launch) and a controller is elected. The broker registers only after
    its logs are loaded and its listeners are bound, so that is Kafka's own readiness signal. With
    ``port=0`` the broker binds a free port and the registration tells us which.
    """

    log_name = "server.log"
    properties_name = "server.properties"

    def __init__(self, cluster: BrokerHost, broker_id: int, overrides: dict[str, str] | None = None,
                 port: int = 0, metrics_port: int = 0) -> None:
        super().__init__()
        self.cluster = cluster
        self.broker_id = broker_id
        self.dir = cluster.dir / f"broker-{broker_id}"
        self.overrides = dict(overrides or {})
        self.configured_port = port
        self.port: int | None = port or None
        #: the broker's ``metrics.port`` (/metrics and /health over HTTP); 0: not set by us
        self.metrics_port = metrics_port
        self.launched_ms = 0

    @property
    def metrics_url(self) -> str | None:
        """Where Prometheus scrapes this broker (None when its metrics endpoint is off)."""
        port = int(self.properties().get("metrics.port", "0") or 0)
        return f"http://127.0.0.1:{port}/metrics" if port else None

    @property
    def health_url(self) -> str | None:
        url = self.metrics_url
        return url[: -len("/metrics")] + "/health" if url else None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.configured_port}",
            "log.dirs": str(self.dir / "data"),
            "zookeeper.connect": self.cluster.zk_connect,
            "zookeeper.session.timeout.ms": "6000",
        }
        if self.metrics_port:
            props["metrics.port"] = str(self.metrics_port)
        props.update(self.overrides)
        return props

    def command(self, props_path: Path) -> list[str]:
        """The broker's command line (the benchmark puts a profiler in front of it)."""
        return [sys.executable, "-m", "kafkalite.broker.main", str(props_path)]

    def launch(self) -> None:
        """Write server.properties and spawn the broker without waiting (see :meth:`wait_ready`)."""
        if self.configured_port and port_in_use(self.configured_port):
            raise ClusterError(f"broker {self.broker_id}: port 127.0.0.1:{self.configured_port} is already in use")
        self.dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.properties_path, self.properties())
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.launched_ms = int(time.time() * 1000)
        self._spawn(self.command(self.properties_path), self.log_path, env)

    def registration(self) -> dict[str, Any] | None:
        """This incarnation's ``/brokers/ids/<id>`` payload, None until it is written."""
        data = self.cluster.zk_get(f"/brokers/ids/{self.broker_id}")
        if data is None:
            return None
        reg = json.loads(data)
        if reg.get("port", -1) > 0 and int(reg.get("timestamp", "0")) >= self.launched_ms:
            return reg
        return None

    def wait_ready(self, timeout: float = 60.0, need_controller: bool = True) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc is not None else "?"
                raise ClusterError(f"broker {self.broker_id} exited with code {code} during start-up; "
                                   f"see {self.log_path}:\n{self.tail()}")
            reg = self.registration()
            if reg is not None:
                self.port = reg["port"]
                # Registration precedes the controller election by a few milliseconds, and
                # admin requests in that gap get NOT_CONTROLLER: wait for a controller too.
                if not need_controller or self.cluster.zk_get("/controller") is not None:
                    return
            time.sleep(0.05)
        raise ClusterError(f"broker {self.broker_id} did not register in ZooKeeper within {timeout:.0f} s; "
                           f"see {self.log_path}:\n{self.tail()}")



class HttpServiceProcess(Process):
    """A service process answering HTTP on ``127.0.0.1:port`` (the schema registry, the console, a
    Connect worker, the SQL server), run as ``python -m <module>``.

    Launching is the same for each: check the port, make the directory, write what the service
    reads (:meth:`write_files`: by default its properties file) and spawn :meth:`command`,
    unbuffered, in ``env`` (default: our own environment).

    Started means: alive and ``GET <ready_path>`` answers 200; a foreign server on the port cannot
    pass, since our process would have failed to bind and exited.
    """

    #: what error messages call the service, and the path that answers 200 once it serves
    what = "service"
    ready_path = "/"
    #: what ``python -m`` runs
    module = ""

    def __init__(self, workdir: str | os.PathLike[str], name: str, port: int = 0,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.dir = Path(workdir) / name
        self.port = port or free_port()
        #: the process's whole environment (as ``Popen``'s ``env``), None: ours
        self.env = dict(env) if env is not None else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        """The service's properties file, Kafka's way (upstream names)."""
        raise NotImplementedError

    def write_files(self) -> None:
        """Write what the service reads at start-up into :attr:`dir`."""
        write_properties(self.properties_path, self.properties())

    def arguments(self) -> list[str]:
        """The module's command-line arguments: by default the path of its properties file."""
        return [str(self.properties_path)]

    def command(self) -> list[str]:
        return [sys.executable, "-m", self.module, *self.arguments()]

    def launch(self) -> None:
        """Write the service's files and spawn it without waiting (see :meth:`wait_ready`)."""
        if port_in_use(self.port):
            raise ClusterError(f"{self.what}: port 127.0.0.1:{self.port} is already in use")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_files()
        env = dict(os.environ if self.env is None else self.env, PYTHONUNBUFFERED="1")
        self._spawn(self.command(), self.log_path, env)

    def answers(self) -> bool:
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        self._await(timeout, self.answers, lambda: f"answer on {self.url}")

    def _await(self, timeout: float, ready: Callable[[], bool], missing: Callable[[], str]) -> None:
        """Poll ``ready`` until it holds; ClusterError (with the log's tail) if the process exits
        first, or after ``timeout``, saying what it did not do (``missing``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc is not None else "?"
                raise ClusterError(f"{self.what} exited with code {code} during start-up; "
                                   f"see {self.log_path}:\n{tail(self.log_path)}")
            if ready():
                return
            time.sleep(0.1)
        raise ClusterError(f"{self.what} did not {missing()} within {timeout:.0f} s; "
                           f"see {self.log_path}:\n{tail(self.log_path)}")


class SchemaRegistryProcess(HttpServiceProcess):
    """One ``kafkalite-schema-registry`` process on ``127.0.0.1:port``.

    Started means: the process is alive and ``GET /`` answers 200. The registry binds its
    listener only after it has replayed ``_schemas`` to the end, so an answer is its own readiness
    signal; a foreign server on the port cannot pass, since our process would have failed to bind
    and exited. ``wait_ready(need_primary=True)`` also waits until this incarnation has logged
    that the election named a primary (its ``primary is now <url>`` line), so writes succeed
    (before that they answer 50004).
    """

    log_name = "schema-registry.log"
    properties_name = "schema-registry.properties"

    what = "schema registry"
    module = "kafkalite.registry.main"

    def __init__(self, workdir: str | os.PathLike[str], bootstrap: str, port: int = 0,
                 overrides: dict[str, str] | None = None, name: str = "registry") -> None:
        super().__init__(workdir, name, port)
        self.bootstrap = bootstrap
        self.overrides = dict(overrides or {})
        #: where this incarnation's lines begin in the log (a restart appends to the same file)
        self._log_start = 0

    def properties(self) -> dict[str, str]:
        props = {"listeners": f"http://127.0.0.1:{self.port}", "host.name": "127.0.0.1",
                 "kafkastore.bootstrap.servers": self.bootstrap}
        props.update(self.overrides)
        return props

    def launch(self) -> None:
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        super().launch()

    def knows_primary(self) -> bool:
        """This incarnation logged a known primary (``kafkalite.registry.service`` logs each change)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                text = f.read().decode(errors="replace")
        except OSError:
            return False
        return "primary is now http" in text

    def wait_ready(self, timeout: float = 60.0, need_primary: bool = False) -> None:
        def ready() -> bool:
            return self.answers() and (not need_primary or self.knows_primary())

        def missing() -> str:
            return "elect a primary" if need_primary and self.answers() else f"answer on {self.url}"
        self._await(timeout, ready, missing)


class ConsoleProcess(HttpServiceProcess):
    """One ``kafkalite-console`` process on ``127.0.0.1:port``, pointed at the cluster's brokers,
    registry, metrics endpoints and ZooKeeper.

    Started means: alive and serving its stylesheet (a page that needs no broker), so the web
    server listens.
    """

    log_name = "console.log"

    what = "console"
    ready_path = "/static/console.css"
    module = "kafkalite.console"

    def __init__(self, workdir: str | os.PathLike[str], bootstrap: str, port: int = 0, *,
                 registry_url: str | None = None, metrics_urls: Sequence[str] = (), zookeeper: str | None = None,
                 extra_args: Sequence[str] = (), name: str = "console", env: Mapping[str, str] | None = None) -> None:
        super().__init__(workdir, name, port, env)
        self.bootstrap = bootstrap
        self.registry_url = registry_url
        self.metrics_urls = list(metrics_urls)
        self.zookeeper = zookeeper
        self.extra_args = list(extra_args)

    def write_files(self) -> None:
        """Nothing: the console takes its settings as options."""

    def arguments(self) -> list[str]:
        args = ["--bootstrap-server", self.bootstrap, "--listen", f"127.0.0.1:{self.port}"]
        if self.registry_url:
            args += ["--registry-url", self.registry_url]
        if self.metrics_urls:
            args += ["--metrics-urls", ",".join(self.metrics_urls)]
        if self.zookeeper:
            args += ["--zookeeper", self.zookeeper]
        return args + self.extra_args


class ConnectWorkerProcess(HttpServiceProcess):
    """One Kafka Connect worker (``kafkalite-connect-distributed``, or ``-standalone`` with
    connector property files) on ``127.0.0.1:port``.

    Started means: the process is alive and ``GET /health`` answers 200, which a distributed
    worker does only once it has read its topics and joined the group.
    """

    log_name = "connect.log"

    what = "connect worker"
    ready_path = "/health"

    def __init__(self, workdir: str | os.PathLike[str], bootstrap: str, port: int = 0,
                 overrides: dict[str, str] | None = None, name: str = "connect",
                 standalone_connectors: list[dict[str, str]] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(workdir, name, port, env)
        self.bootstrap = bootstrap
        self.overrides = dict(overrides or {})
        self.standalone = standalone_connectors is not None
        self.connectors = list(standalone_connectors or [])
        self.module = f"kafkalite.connect.runtime.connect_{'standalone' if self.standalone else 'distributed'}"

    @property
    def properties_path(self) -> Path:
        return self.dir / ("connect-standalone.properties" if self.standalone else "connect-distributed.properties")

    def connector_paths(self) -> list[Path]:
        """A standalone worker's connector property files (``connector-<i>.properties``)."""
        return [self.dir / f"connector-{i}.properties" for i in range(len(self.connectors))]

    def properties(self) -> dict[str, str]:
        props = {"bootstrap.servers": self.bootstrap, "listeners": f"http://127.0.0.1:{self.port}",
                 "rest.advertised.host.name": "127.0.0.1",
                 "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                 "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                 "offset.flush.interval.ms": "1000"}
        if self.standalone:
            props["offset.storage.file.filename"] = str(self.dir / "connect.offsets")
        else:
            props.update({"group.id": "connect-cluster", "config.storage.topic": "connect-configs",
                          "offset.storage.topic": "connect-offsets", "status.storage.topic": "connect-status",
                          "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
                          "status.storage.replication.factor": "1"})
        props.update(self.overrides)
        return props

    def write_files(self) -> None:
        super().write_files()
        for path, connector in zip(self.connector_paths(), self.connectors):
            write_properties(path, connector)

    def arguments(self) -> list[str]:
        return [str(self.properties_path), *map(str, self.connector_paths())]


class SqlServerProcess(HttpServiceProcess):
    """One ``kafkalite-sql-server`` (the ksqlDB role) on ``127.0.0.1:port``, running its queries on
    a local Spark (``spark.master=local[2]``) with its state under its own directory.

    ``security``: Kafka client properties (``security.protocol``, ``sasl.*``, ``ssl.*``: a
    truststore, a client certificate), written into ``ksql-server.properties`` as ksqlDB takes them;
    the server gives them to its own clients and to its Spark queries. With them the
    file is readable by its owner only (they may hold a password).

    Started means: alive and ``GET /healthcheck`` answers 200, which it does only once it has
    replayed its command topic (it listens after that).
    """

    log_name = "ksql-server.log"
    properties_name = "ksql-server.properties"

    what = "SQL server"
    ready_path = "/healthcheck"
    module = "kafkalite.sql.server"

    def __init__(self, workdir: str | os.PathLike[str], bootstrap: str, port: int = 0, *,
                 registry_url: str | None = None, overrides: dict[str, str] | None = None,
                 security: Mapping[str, str] | None = None, name: str = "sql",
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(workdir, name, port, env)
        self.bootstrap = bootstrap
        self.registry_url = registry_url
        self.overrides = dict(overrides or {})
        self.security = dict(security or {})

    def properties(self) -> dict[str, str]:
        props = {"listeners": self.url, "bootstrap.servers": self.bootstrap, "ksql.service.id": "default_",
                 "ksql.streams.state.dir": str(self.dir / "state"), "spark.master": "local[2]"}
        if self.registry_url:
            props["ksql.schema.registry.url"] = self.registry_url
        props.update(self.security)
        props.update(self.overrides)
        return props

    def write_files(self) -> None:
        if self.security:               # a SASL password or a key password may be among them
            self.properties_path.touch(mode=0o600)
            self.properties_path.chmod(0o600)
        super().write_files()


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy; ClusterError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
