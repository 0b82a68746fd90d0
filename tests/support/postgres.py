"""A throwaway PostgreSQL for tests: the fixtures over :mod:`kafkalite.cluster.postgres` (initdb +
pg_ctl in a temp dir on a free port, as `postgres`). ``postgres_factory()`` gives a started, empty
server; ``stop``/``start`` can be repeated, so a test can take the database away from a connector
and bring it back; the fixture stops every server and removes its files at teardown.
"""
from __future__ import annotations

from typing import Callable, Iterator

import pytest

from kafkalite.cluster.postgres import PostgresServer, postgres_bin_dir, start_postgres

__all__ = ["PostgresServer", "postgres", "postgres_factory", "postgres_bin_dir"]


@pytest.fixture
def postgres_factory() -> Iterator[Callable[[], PostgresServer]]:
    """``factory()`` -> a started, empty PostgreSQL; every one is stopped and removed afterwards."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed (scripts/setup installs Debian's postgresql package)")
    made: list[PostgresServer] = []

    def factory() -> PostgresServer:
        server = start_postgres(bin_dir)
        made.append(server)
        return server

    yield factory
    for server in made:
        server.remove()


@pytest.fixture
def postgres(postgres_factory: Callable[[], PostgresServer]) -> PostgresServer:
    return postgres_factory()
