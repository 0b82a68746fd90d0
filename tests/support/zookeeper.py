"""A real standalone ZooKeeper process for tests: the package launcher's, with tests' timing.

:class:`ZooKeeperServer` is :class:`kafkalite.cluster.processes.ZooKeeperProcess` (Debian's jar,
see local-infrastructure.md §1; a free port and its own data dir; ``start`` returns only once
``srvr`` reports a mode *and* ``conf`` shows our own dataDir; ``stop`` always reaps the JVM) with
``tickTime`` 500, so sessions can be 1-2 s. One server serves the whole session; each cluster
lives in its own chroot (``tests.support.brokers``).

:func:`zookeeper_ensemble_factory` makes what the ZooKeeper fault tests need instead: an ensemble
of its own (3 servers by default, same tick) whose servers a test may kill and restart.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from kafkalite.cluster.processes import ZooKeeperEnsemble, ZooKeeperProcess, four_letter, free_port

__all__ = ["TEST_TICK_MS", "ZooKeeperServer", "expire_session", "four_letter", "free_port", "zookeeper",
           "zookeeper_ensemble_factory"]

#: ZooKeeper's tick in tests: sessions of 1-2 s are allowed (the minimum is two ticks).
TEST_TICK_MS = 500


class ZooKeeperServer(ZooKeeperProcess):
    """ZooKeeper with the tests' short tick (500 ms) unless told otherwise."""

    def __init__(self, workdir: str | os.PathLike[str], port: int | None = None, tick_ms: int = TEST_TICK_MS,
                 listen_address: str | None = None) -> None:
        super().__init__(workdir, port or 0, tick_ms, listen_address=listen_address)


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
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=TEST_TICK_MS)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_ensemble_factory(tmp_path: Path) -> Iterator[Callable[..., ZooKeeperEnsemble]]:
    """``make(size=3)`` starts an ensemble of its own (tickTime 500) and returns once it has a
    quorum with one leader; every server is stopped after the test, whatever it killed."""
    made: list[ZooKeeperEnsemble] = []

    def make(size: int = 3) -> ZooKeeperEnsemble:
        ensemble = ZooKeeperEnsemble(tmp_path / f"ensemble-{len(made)}", size, TEST_TICK_MS)
        made.append(ensemble)
        return ensemble.start()

    try:
        yield make
    finally:
        for ensemble in made:
            ensemble.stop()
