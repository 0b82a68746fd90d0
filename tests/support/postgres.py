"""A throwaway PostgreSQL for tests: initdb + pg_ctl in a temp dir on a free port, as `postgres`.

Debian's ``postgresql`` package provides the binaries (/usr/lib/postgresql/<v>/bin; scripts/setup
installs it). initdb refuses to run as root, so under root every command runs through
``runuser -u postgres --`` in a directory chowned to that user. ``start`` returns once the server
accepts connections (pg_ctl -w, then a real login); ``stop``/``start`` can be repeated, so a test
can take the database away from a connector and bring it back; the fixture stops the server and
removes its files at teardown.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from kafkalite.cluster.processes import free_port
from tests.support.waiting import wait_for

__all__ = ["PostgresServer", "postgres", "postgres_factory", "postgres_bin_dir"]


def postgres_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, None if the package is missing."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


class PostgresServer:
    USER = "postgres"

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="kafkalite-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            entry = pwd.getpwnam(self.USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)
        self._run("initdb", "-D", str(self.data), "-U", self.USER, "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--locale=C")

    def _command(self, tool: str, *args: str) -> list[str]:
        command = [str(self.bin_dir / tool), *args]
        return ["runuser", "-u", self.USER, "--", *command] if self._as_root else command

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        result = subprocess.run(self._command(tool, *args), capture_output=True, text=True, timeout=timeout,
                                cwd=self.root)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr.strip()} {log}")

    @property
    def url(self) -> str:
        """An SQLAlchemy URL (psycopg 3)."""
        return f"postgresql+psycopg://{self.USER}@127.0.0.1:{self.port}/postgres"

    @property
    def jdbc_url(self) -> str:
        """The same database as Confluent's connector configuration names it."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres?user={self.USER}"

    def start(self) -> "PostgresServer":
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        wait_for(self.accepts_connections, timeout=30, what=f"PostgreSQL on port {self.port}")
        return self

    def accepts_connections(self) -> bool:
        import psycopg
        try:
            with psycopg.connect(host="127.0.0.1", port=self.port, user=self.USER, dbname="postgres",
                                 connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def execute(self, sql: str, params: tuple[object, ...] | dict[str, object] | None = None) -> list[tuple]:
        """Run one statement (autocommit); the rows it returns, if any."""
        import psycopg
        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.USER, dbname="postgres",
                             autocommit=True) as conn:
            cursor = conn.execute(sql, params)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description else []

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def postgres_factory() -> Iterator[Callable[[], PostgresServer]]:
    """``factory()`` -> a started, empty PostgreSQL; every one is stopped and removed afterwards."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed (scripts/setup installs Debian's postgresql package)")
    made: list[PostgresServer] = []

    def factory() -> PostgresServer:
        server = PostgresServer(bin_dir)
        made.append(server)
        try:
            return server.start()
        except RuntimeError:
            # the free port was taken between choosing and binding it: once more on another
            server.port = free_port()
            return server.start()

    yield factory
    for server in made:
        server.remove()


@pytest.fixture
def postgres(postgres_factory: Callable[[], PostgresServer]) -> PostgresServer:
    return postgres_factory()
