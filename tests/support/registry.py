"""Schema registry processes for tests: the package's ``kafkalite-schema-registry``.

``registry_factory(bootstrap, **overrides)`` starts one instance on a free 127.0.0.1 port and
returns it once ``GET /`` answers (it listens only after replaying ``_schemas``); every instance
is stopped after the test. The tests' default session timeout is 6 s (the broker's
``group.min.session.timeout.ms``) so a killed primary is noticed quickly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.cluster.processes import SchemaRegistryProcess

TEST_REGISTRY_DEFAULTS = {
    "kafkagroup.session.timeout.ms": "6000",
    "kafkagroup.heartbeat.interval.ms": "500",
}


@pytest.fixture
def registry_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[SchemaRegistryProcess] = []

    def make(bootstrap: str, **overrides: str) -> SchemaRegistryProcess:
        props = {**TEST_REGISTRY_DEFAULTS, **{k.replace("_", "."): v for k, v in overrides.items()}}
        proc = SchemaRegistryProcess(tmp_path, bootstrap, overrides=props, name=f"registry-{len(made)}")
        made.append(proc)
        proc.start()
        proc.wait_ready(need_primary=True)      # writes before the election answer 50004
        return proc

    yield make
    for proc in made:
        proc.stop(10)
