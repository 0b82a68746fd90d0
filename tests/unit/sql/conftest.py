"""Fixtures of the SQL unit tests: the REST layer's thread hops made synchronous, a recording
stand-in for the engine's Admin client, and a base for stand-ins of its KafkaClient."""
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


class ClientDouble:
    """A kafkalite client at the engine's boundary, used as ``with Client(...) as c``: made with
    any arguments; a test's subclass adds the calls it answers."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class RecordingAdmin(ClientDouble):
    """kafkalite's Admin at the engine's boundary: the topics it was asked to delete."""
    deleted: list[str] = []

    def delete_topics(self, names: list[str]) -> dict[str, Any]:
        RecordingAdmin.deleted += names
        return {n: None for n in names}
