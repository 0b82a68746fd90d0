"""Suite-wide wiring: markers by directory, Docker skipping, and the shared fixtures.

Fixtures live in ``tests/support/*`` modules and are re-exported here by import.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # so `tests.support` imports also work when run as plain `pytest`
    sys.path.insert(0, _ROOT)

from tests.support.zookeeper import zookeeper, zookeeper_ensemble_factory  # noqa: F401  (fixtures)
from tests.support.brokers import broker, cluster_factory, ensemble_cluster_factory  # noqa: F401
from tests.support.registry import registry_factory  # noqa: F401
from tests.support.inprocess import inprocess_cluster_factory  # noqa: F401

_TIER_BY_DIR = {"unit": "unit", "integration": "integration", "interop": "interop",
                "fault": "fault", "docker": "docker", "spark": "spark"}
_TESTS_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def docker_unavailable_reason() -> str | None:
    """None if a Docker engine answers a ping, else why not (local-infrastructure.md §4.2)."""
    try:
        import docker
    except ImportError:
        return "docker SDK (pip 'docker') not installed"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"[:300]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            tier = Path(item.fspath).resolve().relative_to(_TESTS_DIR).parts[0]
        except ValueError:
            continue
        marker = _TIER_BY_DIR.get(tier)
        # an explicit tier marker wins (e.g. tests/docker's engine-free config checks are unit)
        if marker and not any(item.get_closest_marker(m) for m in _TIER_BY_DIR.values()):
            item.add_marker(getattr(pytest.mark, marker))
    docker_items = [i for i in items if i.get_closest_marker("docker")]
    if docker_items:
        reason = docker_unavailable_reason()
        if reason:
            for item in docker_items:
                item.add_marker(pytest.mark.skip(reason=reason))
