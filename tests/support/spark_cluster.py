"""A Spark standalone cluster for tests: a master and workers as separate processes, started
with PySpark's own launcher (``pyspark/bin/spark-class org.apache.spark.deploy.master.Master``
and ``...deploy.worker.Worker spark://...``: the pip package ships no ``sbin/start-master.sh``).

Everything binds 127.0.0.1 on free ports. Readiness is the master's JSON UI
(``http://127.0.0.1:<webui>/json/``): the master is up when it answers with ``status: ALIVE``,
the cluster when it lists the expected number of ALIVE workers. Daemons get small heaps
(``SPARK_DAEMON_MEMORY``); each worker offers one core and ``worker_memory`` to executors.

Every process the cluster starts (master, workers, the executors the workers launch and their
Python workers) inherits ``KAFKALITE_SPARK_CLUSTER=<tag>`` in its environment; :meth:`stop`
SIGKILLs every process carrying this cluster's tag, so an executor orphaned by a killed worker
is reaped too. A worker runs in a session of its own: :meth:`kill_worker` SIGKILLs its process
group, i.e. the worker with its executor, as when its machine dies.

Workers are started WITHOUT the tests' ``PYTHONPATH``: a driver must hand the executors the
project's path itself (``spark.executorEnv.PYTHONPATH``) and its interpreter
(``spark.pyspark.python``), as a user's driver must on a real cluster (docs/streams.md).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.cluster.processes import free_ports
from tests.support.waiting import wait_for

log = logging.getLogger(__name__)

TAG_VARIABLE = "KAFKALITE_SPARK_CLUSTER"
_LOG4J = Path(__file__).resolve().parents[1] / "spark" / "log4j2.properties"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """A master and ``workers`` workers (one core each) under ``workdir``."""

    def __init__(self, workdir: Path, workers: int = 2, worker_memory: str = "1g",
                 daemon_memory: str = "256m") -> None:
        self.dir = workdir
        self.size = workers
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.tag = uuid.uuid4().hex
        self.port, self.webui_port = free_ports(2)
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        """What drivers pass as ``spark.master``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
        env.update({TAG_VARIABLE: self.tag, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": self.daemon_memory,
                    "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile=file:{_LOG4J}",
                    "SPARK_NO_DAEMONIZE": "1", "TZ": "UTC"})
        return env

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        logfile = open(self.dir / f"{name}.log", "ab")
        try:
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], cwd=self.dir,
                                    env=self._env(), stdout=logfile, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            logfile.close()

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json/`` document, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as resp:
                doc: dict[str, Any] = json.load(resp)
                return doc
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict[str, Any]]:
        doc = self.state() or {}
        return [w for w in doc.get("workers", []) if w.get("state") == "ALIVE"]

    def start(self, timeout: float = 120.0) -> "SparkStandalone":
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self.master = self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                                  "--port", str(self.port), "--webui-port", str(self.webui_port)])
            wait_for(lambda: self._check_running() and (self.state() or {}).get("status") == "ALIVE",
                     timeout, f"the Spark master at {self.webui} (log: {self.dir / 'master.log'})", 0.25)
            for n in range(self.size):
                self.start_worker(n)
            self.wait_workers(self.size, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, n: int) -> subprocess.Popen[bytes]:
        work = self.dir / f"worker-{n}"
        work.mkdir(exist_ok=True)
        proc = self._launch(f"worker-{n}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                            "--webui-port", "0", "--cores", "1", "--memory", self.worker_memory,
                                            "--work-dir", str(work), self.url])
        self.workers.append(proc)
        return proc

    def wait_workers(self, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
        workers: list[dict[str, Any]] = wait_for(
            lambda: self._check_running() and len(self.alive_workers()) >= count and self.alive_workers(),
            timeout, f"{count} ALIVE workers at {self.webui} (logs in {self.dir})", 0.25)
        return workers

    def _check_running(self) -> bool:
        if self.master is not None and self.master.poll() is not None:
            raise AssertionError(f"the Spark master exited with {self.master.returncode}: "
                                 f"{(self.dir / 'master.log').read_text()[-2000:]}")
        return True

    def kill_worker(self, proc: subprocess.Popen[bytes]) -> None:
        """kill -9 a worker with what runs under it (its executor), as a machine failure."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def executor_logs(self) -> dict[int, str]:
        """Per worker: the stderr of every executor it ran (``<work-dir>/app-*/<id>/stderr``)."""
        return {n: "".join(p.read_text(errors="replace") for p in sorted((self.dir / f"worker-{n}").glob("app-*/*/stderr")))
                for n in range(len(self.workers))}

    def tagged_pids(self) -> list[int]:
        """Every live process with this cluster's tag in its environment."""
        needle = f"{TAG_VARIABLE}={self.tag}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
        return pids

    def stop(self) -> None:
        """SIGKILL everything this cluster started (the state is throwaway) and reap it."""
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = self.tagged_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                log.warning("Spark process %d did not exit", proc.pid)


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    """One Spark standalone cluster (a master, two one-core workers) per test module: starting
    one takes ~10-20 s. Everything it started is killed afterwards."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
