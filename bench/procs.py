"""Load-generator processes of the benchmark: waited for together, never left behind."""
from __future__ import annotations

import subprocess


def wait_all(procs: list[subprocess.Popen], timeout: float, what: str) -> None:
    """Wait for every process; kill whatever is still running (on any error too) and raise
    RuntimeError naming ``what`` when one exited non-zero."""
    try:
        codes = [p.wait(timeout) for p in procs]
    finally:
        kill_all(procs)
    if any(codes):
        raise RuntimeError(f"{what} exited with {codes}")


def kill_all(procs: list[subprocess.Popen]) -> None:
    """SIGKILL whatever is still running and reap it."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def stop(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; reaped either way (a no-op once it exited)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
