"""``kafkalite-sql-server`` processes for tests: the launcher's :class:`SqlServerProcess` on a free
127.0.0.1 port, with its state under the test's directory.

``sql_server_factory(bootstrap, {property: value}, env=...)`` starts one server and returns it once
``GET /healthcheck`` answers 200 (it has replayed its command topic); every server is stopped after
the test (``module_sql_server_factory``: after the module's tests). Test defaults: a fresh
``ksql.service.id`` per server (so a fresh command topic), and a Spark driver that binds
127.0.0.1 only and starts no web UI; the process runs this tree's code (first on ``PYTHONPATH``)
in UTC, with ``SPARK_LOCAL_IP=127.0.0.1``.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from kafkalite.cluster.processes import SqlServerProcess

ROOT = Path(__file__).resolve().parents[2]

TEST_SQL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def sql_server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: ours) with this tree first on PYTHONPATH, Spark on 127.0.0.1, and UTC."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    return env


class SqlServerFactory:
    """``make(bootstrap, {property: value}, env=..., timeout=...)``: one more server under
    ``workdir``, started and ready; :meth:`close` stops them all."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.made: list[SqlServerProcess] = []

    def __call__(self, bootstrap: str, properties: Mapping[str, str] | None = None, *,
                 env: Mapping[str, str] | None = None, timeout: float = 120) -> SqlServerProcess:
        n = len(self.made)
        props = {"ksql.service.id": f"t{n}_{uuid.uuid4().hex[:6]}_", **TEST_SQL_DEFAULTS, **(properties or {})}
        server = SqlServerProcess(self.workdir, bootstrap, overrides=props, name=f"sql-{n}", env=sql_server_env(env))
        self.made.append(server)
        server.start(timeout)
        return server

    def close(self) -> None:
        for server in self.made:
            server.stop(60)


@pytest.fixture
def sql_server_factory(tmp_path: Path) -> Iterator[SqlServerFactory]:
    factory = SqlServerFactory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def module_sql_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlServerFactory]:
    """The same for the tests of one module to share a server: one with Spark costs a JVM start
    and about a gigabyte, so tests that each use their own streams may run on one."""
    factory = SqlServerFactory(tmp_path_factory.mktemp("sql"))
    yield factory
    factory.close()
