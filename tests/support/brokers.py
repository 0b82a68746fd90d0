"""Broker processes for tests: real ``kafkalite-server`` processes on ephemeral ports.

Each cluster gets its own ZooKeeper chroot and data directory. A broker counts as started when
its ephemeral ``/brokers/ids/<id>`` znode exists: the broker registers only after its logs are
loaded and its listener is bound, so that is Kafka's own readiness signal. Ports are chosen by
the broker (``listeners=PLAINTEXT://127.0.0.1:0``) and read back from the registration.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient


class BrokerProcess:
    def __init__(self, cluster: "Cluster", broker_id: int, overrides: dict[str, str]) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.dir = cluster.dir / f"broker-{broker_id}"
        self.overrides = overrides
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    def properties(self) -> dict[str, str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.dir / "data"),
            "zookeeper.connect": self.cluster.zk_connect,
            "zookeeper.session.timeout.ms": "6000",
            # a whole-cluster stop leaves the last brokers nowhere to move leaderships: keep its
            # controlled-shutdown retries short (Kafka default 5000 ms)
            "controlled.shutdown.retry.backoff.ms": "200",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    def command(self, props_path: Path) -> list[str]:
        """The broker's command line (the benchmark puts a profiler in front of it)."""
        return [sys.executable, "-m", "kafkalite.broker.main", str(props_path)]

    def start(self, timeout: float = 60.0) -> "BrokerProcess":
        self.dir.mkdir(parents=True, exist_ok=True)
        props_path = self.dir / "server.properties"
        props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        log = open(self.log_path, "ab")
        launched_ms = int(time.time() * 1000)
        self.proc = subprocess.Popen(self.command(props_path), stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        path = f"/brokers/ids/{self.broker_id}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker {self.broker_id} exited with {self.proc.returncode}:\n{self.tail()}")
            data = self.cluster.zk_get(path)
            if data is not None:
                reg = json.loads(data)
                # after a kill -9 the previous incarnation's znode lingers until its session
                # expires; its registration timestamp predates this launch
                if reg.get("port", -1) > 0 and int(reg.get("timestamp", "0")) >= launched_ms:
                    self.port = reg["port"]
                    # Registration precedes the controller election by a few milliseconds, and
                    # admin requests in that gap get NOT_CONTROLLER: wait for a controller too.
                    if self.cluster.zk_get("/controller") is not None:
                        return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker {self.broker_id} did not register within {timeout}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait: returns the exit code (None if it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """N brokers in one ZooKeeper chroot; ``stop()`` always leaves no process behind."""

    def __init__(self, zookeeper: Any, workdir: Path, size: int = 1, overrides: dict[str, str] | None = None,
                 first_id: int = 1) -> None:
        self.zookeeper = zookeeper
        self.dir = Path(workdir)
        self.chroot = f"/kafkalite-test-{uuid.uuid4().hex[:10]}"
        self.zk_connect = f"{zookeeper.hosts}{self.chroot}"
        self._zk: KazooClient | None = None
        self.brokers = [BrokerProcess(self, first_id + i, dict(overrides or {})) for i in range(size)]

    @property
    def zk(self) -> KazooClient:
        """A kazoo client on the ZooKeeper root (prefix paths with ``self.chroot``)."""
        if self._zk is None:
            self._zk = KazooClient(hosts=self.zookeeper.hosts, timeout=10)
            self._zk.start(15)
        return self._zk

    def zk_get(self, path: str) -> bytes | None:
        """Data of ``path`` inside this cluster's chroot, None if absent."""
        try:
            return self.zk.get(self.chroot + path)[0]
        except Exception:
            return None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.port)

    def start(self) -> "Cluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            for b in self.brokers:
                b.start()
        except BaseException:
            self.stop()
            raise
        return self

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def stop(self) -> None:
        for b in self.brokers:
            if b.alive:
                b.proc.send_signal(signal.SIGTERM)
        for b in self.brokers:
            if b.proc is not None:
                try:
                    b.proc.wait(20)
                except subprocess.TimeoutExpired:
                    b.kill()
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                pass
            self._zk = None


@pytest.fixture
def cluster_factory(zookeeper: Any, tmp_path: Path) -> Any:
    """``make(size=1, **overrides)`` starts a cluster in its own chroot; all are stopped after the test."""
    made: list[Cluster] = []

    def make(size: int = 1, overrides: dict[str, str] | None = None) -> Cluster:
        cluster = Cluster(zookeeper, tmp_path / f"cluster-{len(made)}", size, overrides)
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
