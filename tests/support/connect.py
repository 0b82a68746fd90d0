"""Kafka Connect worker processes for tests: the package's ``kafkalite-connect-distributed`` (or
``-standalone``) on free 127.0.0.1 ports.

``connect_factory(bootstrap, **overrides)`` starts one distributed worker and returns it once
``GET /health`` answers 200 (it has read its topics and joined the group); ``standalone=[...]``
runs a standalone worker with those connector configurations instead. Every worker is stopped
after the test. Test defaults: a 6 s session (the broker's minimum) and quick offset flushes.
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
}


@pytest.fixture
def connect_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[ConnectWorkerProcess] = []

    def make(bootstrap: str, standalone: list[dict[str, str]] | None = None, **overrides: str) -> ConnectWorkerProcess:
        props = dict(TEST_CONNECT_DEFAULTS)
        if standalone is not None:
            props = {"offset.flush.interval.ms": props["offset.flush.interval.ms"]}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        proc = ConnectWorkerProcess(tmp_path, bootstrap, overrides=props, name=f"connect-{len(made)}",
                                    standalone_connectors=standalone)
        made.append(proc)
        proc.start(90)
        return proc

    yield make
    for proc in made:
        proc.stop(20)
