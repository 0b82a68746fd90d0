"""Kafka Connect worker processes for tests: the package's ``kafkalite-connect-distributed`` (or
``-standalone``) on free 127.0.0.1 ports.

``connect_factory(bootstrap, **overrides)`` starts one distributed worker and returns it once
``GET /health`` answers 200 (it has read its topics and joined the group); ``standalone=[...]``
runs a standalone worker with those connector configurations instead. Every worker is stopped
after the test. Test defaults: 6 s sessions (the broker's minimum), for the workers' group and
the sink tasks' consumers, and quick offset flushes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.cluster.processes import ConnectWorkerProcess

TEST_CONNECT_DEFAULTS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
    "offset.flush.interval.ms": "500",
    # sink tasks' consumer groups: a killed worker's consumers leave them sooner
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "500",
}
#: the worker (group membership) settings a standalone worker has no use for
_DISTRIBUTED_ONLY = ("session.timeout.ms", "heartbeat.interval.ms")


@pytest.fixture
def connect_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[ConnectWorkerProcess] = []

    def make(bootstrap: str, standalone: list[dict[str, str]] | None = None, **overrides: str) -> ConnectWorkerProcess:
        props = dict(TEST_CONNECT_DEFAULTS)
        if standalone is not None:
            props = {k: v for k, v in props.items() if k not in _DISTRIBUTED_ONLY}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        proc = ConnectWorkerProcess(tmp_path, bootstrap, overrides=props, name=f"connect-{len(made)}",
                                    standalone_connectors=standalone)
        made.append(proc)
        proc.start(90)
        return proc

    yield make
    for proc in made:
        proc.stop(20)
