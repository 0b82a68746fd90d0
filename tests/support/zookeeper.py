"""A real standalone ZooKeeper process for tests: the package launcher's, with tests' timing.

:class:`ZooKeeperServer` is :class:`kafkalite.cluster.processes.ZooKeeperProcess` (Debian's jar,
see local-infrastructure.md §1; a free port and its own data dir; ``start`` returns only once
``srvr`` reports a mode *and* ``conf`` shows our own dataDir; ``stop`` always reaps the JVM) with
``tickTime`` 500, so sessions can be 1-2 s. One server serves the whole session; each cluster
lives in its own chroot (``tests.support.brokers``).
"""
from __future__ import annotations

import os
from typing import Iterator

import pytest

from kafkalite.cluster.processes import ZooKeeperProcess, four_letter, free_port

__all__ = ["ZooKeeperServer", "expire_session", "four_letter", "free_port", "zookeeper"]


class ZooKeeperServer(ZooKeeperProcess):
    """ZooKeeper with the tests' short tick (500 ms) unless told otherwise."""

    def __init__(self, workdir: str | os.PathLike[str], port: int | None = None, tick_ms: int = 500,
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
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500)
    try:
        server.start()
        yield server
    finally:
        server.stop()
