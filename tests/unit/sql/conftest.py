"""Fixtures of the SQL server's REST unit tests: its thread hops made synchronous."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer

from kafkalite.sql import rest


class Direct:
    """Stands in for the reactor: ``callFromThread`` runs at once."""

    @staticmethod
    def callFromThread(f: Any, *a: Any) -> None:
        f(*a)


@pytest.fixture
def inline(monkeypatch: Any) -> None:
    """``deferToThread`` and ``callFromThread`` in ``kafkalite.sql.rest`` run inline."""
    monkeypatch.setattr(rest.threads, "deferToThread", lambda f, *a: defer.maybeDeferred(f, *a))
    monkeypatch.setattr(rest, "reactor", Direct)
