"""Figures tests print and keep in ``var/test-reports/*.json`` (gitignored), never assert on.

Several tests merge into one file, and the suite runs them in two processes (pytest-xdist), so a
merge takes an exclusive lock on a side file and replaces the JSON atomically.
"""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

REPORTS = Path(os.environ.get("KAFKALITE_ROOT", Path(__file__).resolve().parents[2])) / "var" / "test-reports"


def merge_report(name: str, key: str, value: Any) -> Path:
    """Set ``key`` to ``value`` in ``var/test-reports/<name>.json``; returns the file."""
    path = REPORTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        data[key] = value
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    return path
