"""A real standalone ZooKeeper process for tests (Debian's jar, see local-infrastructure.md §1).

Each server gets a free port and its own data dir; ``start`` returns only once ``srvr``
reports a mode *and* ``conf`` shows our own dataDir (so a foreign server on the port is never
mistaken for ours); ``stop`` always reaps the JVM. ``tickTime`` 500 lets sessions be 1-2 s.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

ZK_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_JAR = "/usr/share/java/slf4j-simple.jar"
ZK_JVM_OPTS = ["-Xms16m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def four_letter(cmd: str, port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> str:
    """Send a four-letter word and return the whole reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    def __init__(self, workdir: str | os.PathLike[str], port: int | None = None,
                 tick_ms: int = 500) -> None:
        self.dir = Path(workdir).resolve()
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(f"tickTime={self.tick_ms}\ndataDir={self.data_dir}\n"
                       f"clientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                       "maxClientCnxns=0\nadmin.enableServer=false\n"
                       "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf\n")
        return cfg

    def is_ready(self) -> bool:
        try:
            return ("Mode:" in four_letter("srvr", self.port)
                    and f"dataDir={self.data_dir}/version-2" in four_letter("conf", self.port))
        except OSError:
            return False

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        for path in (ZK_JAR, SLF4J_JAR):
            if not os.path.exists(path):
                raise RuntimeError(f"{path} missing: apt-get install zookeeper")
        cfg = self._write_config()
        with open(self.dir / "zookeeper.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["java", *ZK_JVM_OPTS, "-cp", f"{ZK_JAR}:{SLF4J_JAR}",
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited rc={self.proc.returncode};"
                                   f" see {self.dir}/zookeeper.log")
            if self.is_ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"ZooKeeper not serving on {self.hosts} after {timeout} s")

    def pause(self) -> None:
        """SIGSTOP the JVM: clients go SUSPENDED; expiry on resume is NOT deterministic."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def expire_session(kazoo_client_id: tuple[int, bytes], hosts: str, timeout: float = 10.0) -> None:
    """Force-expire a session from outside: a twin client attaches with the same id and
    password, then closes it (ZooKeeper deletes its ephemerals at once). Blocking: call it
    from a plain thread, never from a reactor thread. Test-only use of kazoo."""
    from kazoo.client import KazooClient
    twin = KazooClient(hosts=hosts, client_id=kazoo_client_id)
    twin.start(timeout)
    try:
        twin.stop()
    finally:
        twin.close()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper (tickTime 500) for the whole test session; tests use distinct paths/chroots."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500)
    try:
        server.start()
        yield server
    finally:
        server.stop()
