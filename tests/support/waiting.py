"""Bounded polling for tests: no fixed sleeps, a clear message when the wait runs out."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str | Callable[[], str] = "condition",
             interval: float = 0.05) -> Any:
    """Return ``predicate()``'s first truthy value; AssertionError after ``timeout`` seconds.

    ``what`` names the awaited condition; a callable is asked at the timeout, so the message can
    say what the system under test was doing then (a query's state, its last error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")
