"""What the one-scenario diagnostic tools (``bench.live_lag``, ``bench.consume_trace``) share:
their ``--consumer-conf`` argument and a one-broker system of either kind in a temporary
directory with a ZooKeeper of its own, removed afterwards."""
from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


def consumer_conf(text: str) -> dict[str, Any]:
    """``--consumer-conf``'s JSON object of librdkafka settings; SystemExit with one line if not."""
    try:
        conf = json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"--consumer-conf: not JSON: {exc}") from None
    if not isinstance(conf, dict):
        raise SystemExit("--consumer-conf: a JSON object of librdkafka settings, e.g. '{\"fetch.min.bytes\": 1}'")
    return conf


@contextlib.contextmanager
def one_system(kafka: bool, prefix: str) -> Iterator[Any]:
    """Kafka 0.9.0.1 (``kafka``) or kafkalite with its own ZooKeeper under a fresh ``/tmp``
    directory named ``prefix...``; both stopped and the directory removed on exit. The cluster
    modules are imported here, so that a tool's argument errors come before their cost."""
    from bench.systems import Kafka09, Kafkalite
    from tests.support.zookeeper import ZooKeeperServer
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    zk = ZooKeeperServer(tmp / "zookeeper", tick_ms=2000)
    system = (Kafka09 if kafka else Kafkalite)(zk, tmp / "cluster")
    try:
        zk.start()
        yield system
    finally:
        system.stop()
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
