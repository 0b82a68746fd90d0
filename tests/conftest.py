"""Suite-wide wiring: markers by directory, Docker skipping, strict encoding, shared fixtures.

Fixtures live in ``tests/support/*`` modules and are re-exported here by import.

The whole suite encodes strictly (kafkalite/protocol/codec.py): a response or request dict with
a field that no version has, or without a field of the version being sent, is an EncodeError
instead of a silently sent default. The environment variable is set before anything imports the
codec and is inherited by every broker, tool and client process the tests start (the launcher
passes ``os.environ`` on). ``lenient_codec`` gives one test the production (default-filling) mode.
"""
from __future__ import annotations

import functools
import gc
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

os.environ["KAFKALITE_STRICT_CODEC"] = "1"

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # so `tests.support` imports also work when run as plain `pytest`
    sys.path.insert(0, _ROOT)

from kafkalite.protocol import codec  # noqa: E402
from tests.support.zookeeper import zookeeper, zookeeper_ensemble_factory  # noqa: F401,E402  (fixtures)
from tests.support.brokers import broker, cluster_factory, ensemble_cluster_factory  # noqa: F401,E402
from tests.support.registry import memory_registry, registry_factory  # noqa: F401,E402
from tests.support.connect import connect_factory  # noqa: F401,E402
from tests.support.sql_server import module_sql_server_factory, sql_server_factory  # noqa: F401,E402
from tests.support.inprocess import inprocess_cluster_factory  # noqa: F401,E402
from tests.support.postgres import postgres, postgres_factory  # noqa: F401,E402
from tests.support.spark_cluster import spark_standalone  # noqa: F401,E402

assert codec.STRICT_ENV == "KAFKALITE_STRICT_CODEC"
codec.set_strict(True)      # also when a plugin imported the codec before this file ran


@pytest.fixture(autouse=True)
def _codec_strict_again() -> Iterator[None]:
    """Every test starts strict, whatever one before it in this process left behind: the order of
    tests in a worker process is not fixed (pytest-xdist), and a lenient codec must not leak."""
    codec.set_strict(True)
    yield


@pytest.fixture
def lenient_codec() -> Iterator[None]:
    """The production encoding for one test: missing keys take defaults, unknown keys are ignored."""
    codec.set_strict(False)
    try:
        yield
    finally:
        codec.set_strict(True)

_TIER_BY_DIR = {"unit": "unit", "inprocess": "inprocess", "integration": "integration", "interop": "interop",
                "fault": "fault", "docker": "docker", "spark": "spark", "browser": "browser"}
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


@pytest.hookimpl(tryfirst=True)       # before pytest-xdist reads the xdist_group marks set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouping = config.pluginmanager.hasplugin("xdist")
    for item in items:
        try:
            relative = Path(item.fspath).resolve().relative_to(_TESTS_DIR)
        except ValueError:
            continue
        tier = relative.parts[0]
        if grouping:
            # scripts/test's workers (--dist loadgroup) take a whole file at a time, so module
            # fixtures start once; every Spark test shares one worker and its one SparkSession
            item.add_marker(pytest.mark.xdist_group("spark" if tier == "spark" else str(relative)))
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


# -- client handles left in reference cycles -----------------------------------------------------
#: tiers whose tests use real client libraries against processes that end with the module
_COLLECTED_TIERS = {"integration", "spark", "browser", "interop", "fault"}


@pytest.hookimpl(trylast=True)          # after the module's fixtures (its brokers) were torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A cyclic garbage collection where a module of those tiers ends. Why: a confluent-kafka
    AdminClient whose ``create_topics`` futures ran sits in a reference cycle, and its librdkafka
    threads live on until the collector finds it, which in a worker process running for half an
    hour can be never: CI's log showed one reconnecting every second to a SASL_SSL cluster gone
    for minutes, its lines burying a later test's own output."""
    if nextitem is not None and nextitem.path == item.path:
        return
    try:
        tier = Path(item.path).resolve().relative_to(_TESTS_DIR).parts[0]
    except ValueError:
        return
    if tier in _COLLECTED_TIERS:
        gc.collect()


# -- where the suite's time goes: printed after the slowest durations -------------------------------
_SECONDS_BY_TIER: dict[str, float] = {}
_SECONDS_BY_WORKER: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds a test's setup, call and teardown time to its tier's and (under pytest-xdist, in the
    controller) its worker's sums, so a run says which tier and which worker set its length."""
    parts = Path(report.nodeid.split("::")[0]).parts
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"
    _SECONDS_BY_TIER[tier] = _SECONDS_BY_TIER.get(tier, 0.0) + report.duration
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    if gateway is not None:
        _SECONDS_BY_WORKER[gateway.id] = _SECONDS_BY_WORKER.get(gateway.id, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: "pytest.TerminalReporter") -> None:
    if not _SECONDS_BY_TIER:
        return
    tiers = sorted(_SECONDS_BY_TIER.items(), key=lambda kv: -kv[1])
    terminalreporter.write_line("time per tier (setup, call and teardown): "
                                + ", ".join(f"{tier} {seconds:.0f} s" for tier, seconds in tiers))
    if _SECONDS_BY_WORKER:
        terminalreporter.write_line("time per worker: " + ", ".join(
            f"{worker} {seconds:.0f} s" for worker, seconds in sorted(_SECONDS_BY_WORKER.items())))
