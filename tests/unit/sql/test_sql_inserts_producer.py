"""INSERT VALUES and every /inserts-stream request write through the engine's one producer
(``inserts.SharedProducer``): made once, on first use; left open when a request ends; replaced
after it fails, the failure still reported; closed at the engine's stop."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.inserts import SharedProducer
from tests.support.waiting import wait_for
from tests.unit.sql.test_sql_engine_statements import FakeProducer, engine  # noqa: F401  (the fixture)


@pytest.fixture(autouse=True)
def producers(monkeypatch: Any) -> list[FakeProducer]:
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    FakeProducer.sent, FakeProducer.made = [], []
    return FakeProducer.made


def _stream_rows(engine: Engine, rows: list[dict[str, Any]]) -> list[Any]:
    """One /inserts-stream request's rows through the engine's subscriber; their outcomes."""
    outcomes: list[Any] = []
    sub = engine.inserts_subscriber("s")
    for row in rows:
        sub.send(row, outcomes.append)
    sub.close()
    return outcomes


def test_statements_and_inserts_streams_share_one_producer(engine: Engine, producers: list[FakeProducer]) -> None:
    assert producers == []                                      # nothing made before the first insert
    for i in range(5):
        engine.execute(f"INSERT INTO s (id, v) VALUES ('k{i}', {i});")
    assert _stream_rows(engine, [{"id": "a", "v": 1}, {"id": "b", "v": 2}]) == [None, None]
    assert _stream_rows(engine, [{"id": "c", "v": 3}]) == [None]
    engine.execute("INSERT INTO t (id, v) VALUES ('x', 9);")
    assert len(producers) == 1 and len(FakeProducer.sent) == 9
    assert [key for _, key, _, _ in FakeProducer.sent[5:8]] == [b"a", b"b", b"c"]


def test_an_inserts_stream_ending_leaves_the_producer_open(engine: Engine, producers: list[FakeProducer]) -> None:
    _stream_rows(engine, [{"id": "a", "v": 1}])
    sub = engine.inserts_subscriber("s")                        # a request whose client went away
    sub.close()
    assert not producers[0].closed
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 1);")
    assert FakeProducer.sent[-1][:2] == ("s", b"k") and len(producers) == 1


def test_the_engines_stop_closes_it_and_later_inserts_fail(engine: Engine, producers: list[FakeProducer]) -> None:
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 1);")
    engine.stop()
    assert producers[0].closed
    with pytest.raises(KsqlError, match=r"^Failed to insert values into 'S'\. .*shutting down"):
        engine.execute("INSERT INTO s (id, v) VALUES ('k', 2);")
    assert len(producers) == 1


def test_a_failed_producer_is_replaced_and_the_error_reported(engine: Engine, producers: list[FakeProducer]) -> None:
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 1);")
    producers[0].fail_with = RuntimeError("PRODUCER_FENCED")
    with pytest.raises(KsqlError) as err:
        engine.execute("INSERT INTO s (id, v) VALUES ('k', 2);")
    assert err.value.message == "Failed to insert values into 'S'. PRODUCER_FENCED"
    wait_for(lambda: producers[0].closed, timeout=30, what="the failed producer closed")
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 3);")    # a new producer takes over
    assert len(producers) == 2 and FakeProducer.sent[-1][2] == b'{"V":3,"NAME":null}'
    # an inserts-stream row's failure reaches its ack callback (the error line), then the same
    producers[1].fail_with = RuntimeError("broker gone")
    (outcome,) = _stream_rows(engine, [{"id": "a", "v": 1}])
    assert isinstance(outcome, RuntimeError) and str(outcome) == "broker gone"
    assert _stream_rows(engine, [{"id": "b", "v": 2}]) == [None] and len(producers) == 3


def test_a_send_refused_at_once_also_replaces_it(engine: Engine, producers: list[FakeProducer]) -> None:
    """A producer closed under the engine (its send raises) is not used again."""
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 1);")
    producers[0].closed = True
    with pytest.raises(KsqlError, match="producer is closed"):
        engine.execute("INSERT INTO s (id, v) VALUES ('k', 2);")
    engine.execute("INSERT INTO s (id, v) VALUES ('k', 3);")
    assert len(producers) == 2 and not producers[1].closed


def test_concurrent_first_uses_make_one_producer() -> None:
    made: list[FakeProducer] = []
    gate = threading.Event()

    def make() -> Any:
        gate.wait(10)                                           # every thread reaches the holder first
        made.append(FakeProducer())
        return made[-1]
    shared = SharedProducer(make)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda i=i: results.append(  # type: ignore[misc]
        shared.send("s", b"v", str(i).encode()).result(10))) for i in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(30)
    assert len(made) == 1 and len(results) == 8
    shared.close()
    assert made[0].closed


def test_a_request_that_cannot_get_a_producer_is_refused_before_any_row(engine: Engine, monkeypatch: Any) -> None:
    """As when each request made its own: the request fails as a whole (the HTTP layer's 500)."""
    def unreachable(*a: Any, **kw: Any) -> Any:
        raise ConnectionError("no broker")
    monkeypatch.setattr(engine_mod, "Producer", unreachable)
    with pytest.raises(ConnectionError):
        engine.inserts_subscriber("s")
