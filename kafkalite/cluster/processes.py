"""The processes of a local cluster: one ZooKeeper JVM and kafkalite brokers, as plain processes.

A process is known either as a child we started (a ``Popen``) or, for a later command of the
``kafkalite-cluster`` tool, by the pid and kernel start time recorded in the cluster's state file.
The start time guards against pid reuse: a recorded pid whose ``/proc/<pid>/stat`` start time
differs is someone else's process and is never signalled. Zombies count as dead (a detached
broker whose parent exited may linger as a zombie until init reaps it; it holds no ports).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Protocol

ZK_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_JAR = "/usr/share/java/slf4j-simple.jar"
ZK_JVM_OPTS = ["-Xms16m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


class ClusterError(RuntimeError):
    """A local-cluster operation failed; str() is meant for the user (one line, then a log tail)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel considers free now (bind to 0). Another process may still take it
    before we do; starting on a taken port fails loudly, never silently."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


class Process:
    """One OS process we manage: started here (``proc``) or re-attached from a state file."""

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
                                         env=env, start_new_session=True)
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

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait ``timeout``, then SIGKILL. Returns the exit code when known."""
        if self.alive:
            self.terminate()
            if not self.wait(timeout):
                self.kill()
                return None
        return self.proc.returncode if self.proc is not None else None


class ZooKeeperProcess(Process):
    """Debian's ZooKeeper jar run as a plain JVM (as ``scripts/zookeeper-server-start`` does).

    Ready when ``srvr`` reports a mode *and* ``conf`` shows our own dataDir, so a foreign server
    on the same port is never mistaken for ours (``ruok`` answers before it serves requests).

    ``host`` is where clients (and the readiness probe) reach it; it listens there only, unless
    ``listen_address`` says otherwise (``0.0.0.0``: every address, e.g. a bridge that brokers in
    network namespaces reach it through).
    """

    def __init__(self, workdir: str | os.PathLike[str], port: int = 0, tick_ms: int = 2000,
                 host: str = "127.0.0.1", log_path: Path | None = None,
                 listen_address: str | None = None) -> None:
        super().__init__()
        self.dir = Path(workdir).resolve()
        self.port = port or free_port(host)
        self.host = host
        self.listen_address = listen_address or host
        self.tick_ms = tick_ms
        self.log_path = log_path or self.dir / "zookeeper.log"

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def config_path(self) -> Path:
        return self.dir / "zoo.cfg"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={self.tick_ms}\ndataDir={self.data_dir}\nclientPort={self.port}\n"
            f"clientPortAddress={self.listen_address}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf\n")
        return self.config_path

    def command(self) -> list[str]:
        return ["java", *ZK_JVM_OPTS, "-cp", f"{ZK_JAR}:{SLF4J_JAR}",
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.config_path)]

    def is_ready(self) -> bool:
        try:
            return ("Mode:" in four_letter("srvr", self.port, self.host)
                    and f"dataDir={self.data_dir}/version-2" in four_letter("conf", self.port, self.host))
        except OSError:
            return False

    def launch(self) -> None:
        """Spawn the JVM without waiting (see :meth:`wait_ready`)."""
        for path in (ZK_JAR, SLF4J_JAR):
            if not os.path.exists(path):
                raise ClusterError(f"{path} not found: install Debian's zookeeper package (bash scripts/setup)")
        if not any(os.access(os.path.join(d, "java"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep)):
            raise ClusterError("java not found on PATH: install openjdk-17-jre-headless (bash scripts/setup)")
        if port_in_use(self.port, self.host):
            raise ClusterError(f"ZooKeeper port {self.hosts} is already in use")
        self.write_config()
        self._spawn(self.command(), self.log_path)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise ClusterError(f"ZooKeeper exited during start-up (port {self.hosts} taken?); "
                                   f"see {self.log_path}:\n{tail(self.log_path)}")
            if self.is_ready():
                return
            time.sleep(0.05)
        raise ClusterError(f"ZooKeeper not serving on {self.hosts} after {timeout:.0f} s; see {self.log_path}")

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


class BrokerHost(Protocol):
    """What a broker needs from the cluster it belongs to."""

    dir: Path
    zk_connect: str

    def zk_get(self, path: str) -> bytes | None: ...


class BrokerProcess(Process):
    """One ``kafkalite-server`` process.

    Started means: its ephemeral ``/brokers/ids/<id>`` exists with a registration written by
    *this* incarnation (after a kill -9 the old znode lingers until its session expires; its
    timestamp predates our launch) and a controller is elected. The broker registers only after
    its logs are loaded and its listeners are bound, so that is Kafka's own readiness signal. With
    ``port=0`` the broker binds a free port and the registration tells us which.
    """

    def __init__(self, cluster: BrokerHost, broker_id: int, overrides: dict[str, str] | None = None,
                 port: int = 0) -> None:
        super().__init__()
        self.cluster = cluster
        self.broker_id = broker_id
        self.dir = cluster.dir / f"broker-{broker_id}"
        self.overrides = dict(overrides or {})
        self.configured_port = port
        self.port: int | None = port or None
        self.launched_ms = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    @property
    def properties_path(self) -> Path:
        return self.dir / "server.properties"

    def properties(self) -> dict[str, str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.configured_port}",
            "log.dirs": str(self.dir / "data"),
            "zookeeper.connect": self.cluster.zk_connect,
            "zookeeper.session.timeout.ms": "6000",
        }
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
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
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

    def start(self, timeout: float = 60.0) -> "BrokerProcess":
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)


class SchemaRegistryProcess(Process):
    """One ``kafkalite-schema-registry`` process on ``127.0.0.1:port``.

    Started means: the process is alive and ``GET /`` answers 200. The registry binds its
    listener only after it has replayed ``_schemas`` to the end, so an answer is its own readiness
    signal; a foreign server on the port cannot pass, since our process would have failed to bind
    and exited.
    """

    def __init__(self, workdir: str | os.PathLike[str], bootstrap: str, port: int = 0,
                 overrides: dict[str, str] | None = None, name: str = "registry") -> None:
        super().__init__()
        self.dir = Path(workdir) / name
        self.bootstrap = bootstrap
        self.port = port or free_port()
        self.overrides = dict(overrides or {})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "schema-registry.log"

    @property
    def properties_path(self) -> Path:
        return self.dir / "schema-registry.properties"

    def properties(self) -> dict[str, str]:
        props = {"listeners": f"http://127.0.0.1:{self.port}", "host.name": "127.0.0.1",
                 "kafkastore.bootstrap.servers": self.bootstrap}
        props.update(self.overrides)
        return props

    def launch(self) -> None:
        if port_in_use(self.port):
            raise ClusterError(f"schema registry: port 127.0.0.1:{self.port} is already in use")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._spawn([sys.executable, "-m", "kafkalite.registry.main", str(self.properties_path)], self.log_path, env)

    def answers(self) -> bool:
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen(self.url + "/", timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc is not None else "?"
                raise ClusterError(f"schema registry exited with code {code} during start-up; "
                                   f"see {self.log_path}:\n{tail(self.log_path)}")
            if self.answers():
                return
            time.sleep(0.1)
        raise ClusterError(f"schema registry did not answer on {self.url} within {timeout:.0f} s; "
                           f"see {self.log_path}:\n{tail(self.log_path)}")

    def start(self, timeout: float = 60.0) -> "SchemaRegistryProcess":
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)


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
