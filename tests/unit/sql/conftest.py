"""Fixtures of the SQL unit tests: the REST layer's thread hops made synchronous, and a recording
stand-in for the engine's Admin client."""
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


class RecordingAdmin:
    """kafkalite's Admin at the engine's boundary: the topics it was asked to delete."""
    deleted: list[str] = []

    def __init__(self, *a: Any, **kw: Any) -> None:
        pass

    def __enter__(self) -> "RecordingAdmin":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def delete_topics(self, names: list[str]) -> dict[str, Any]:
        RecordingAdmin.deleted += names
        return {n: None for n in names}
