"""Running a Python stream-processing library's application against a kafkalite cluster.

Quix Streams and faust-streaming pin versions below what the shared environment holds
(quixstreams 3.28.1: confluent-kafka<2.13; faust-streaming, every release: click<8.4; see
FINDINGS.md F4), so they cannot be installed beside the other interop clients. Their applications
therefore run as subprocesses of an interpreter that has them: ``KAFKALITE_STREAMS_PYTHON``, else
the repository's ``.venv-streams`` if it exists (setup.cfg's ``streams-interop`` extra), else this
one. A test whose library that interpreter cannot import is skipped with
the reason; the brokers always run from this environment.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).parent / "streams_apps"


def streams_python(module: str, venv: str = ".venv-streams") -> str:
    """The interpreter that can import ``module`` (``KAFKALITE_STREAMS_PYTHON``, else the
    repository's ``venv``, else this one), or skip the test saying why."""
    local = Path(__file__).resolve().parents[2] / venv / "bin" / "python"
    python = os.environ.get("KAFKALITE_STREAMS_PYTHON") or (str(local) if local.exists() else sys.executable)
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{module} is not importable by {python} (set KAFKALITE_STREAMS_PYTHON; FINDINGS.md)")
    return python


def start_app(python: str, args: list[str], log: Path, cwd: Path,
              extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start an application script in its own process group, its output to ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    env.pop("PYTHONPATH", None)      # the app is a plain user of the library, not of kafkalite
    with log.open("ab") as out:
        return subprocess.Popen([python, *args], stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, start_new_session=True)


def stop_app(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGTERM (the libraries' clean shutdown), then kill the group if it does not exit."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode


def tail(log: Path, n: int = 4000) -> str:
    return log.read_text(errors="replace")[-n:] if log.exists() else ""
