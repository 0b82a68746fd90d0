"""The in-memory ZooKeeper on a MemoryReactorClock: ordering, faults and timing, no processes.

Its behaviour against a real ZooKeeper is compared in tests/integration/test_coordination.py;
these tests pin what only a fake clock can show deterministically: nothing happens until the
reactor turns, deliveries keep their order, session timeouts follow the clock, and the fault
hooks do what the in-process broker tests will need.
"""
from __future__ import annotations

import subprocess
import sys
from typing import Any, Callable

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock

from kafkalite.coordination import (BrokerIdInUseError, ClientClosedError, ConnectionLossError,
                                    CreateOp, KafkaZkClient, MemoryZooKeeperClient,
                                    MemoryZooKeeperServer, NodeExistsError, NoNodeError,
                                    SessionState, SetDataOp, ZkError)
from kafkalite.coordination.memory import JUTE_MAX_BUFFER
from zk_schema import BrokerRegistration, EndPoint
from tests.support.deferreds import drive


class Harness:
    """A server on a MemoryReactorClock; ``result`` pumps the reactor until a Deferred fired."""

    def __init__(self) -> None:
        self.clock = MemoryReactorClock()
        self.server = MemoryZooKeeperServer(self.clock)

    def result(self, d: defer.Deferred[Any]) -> Any:
        return drive(self.clock, d, turns=1)

    def started(self, connect: str = "memory/kafka", session_timeout_ms: int = 6000) -> MemoryZooKeeperClient:
        client = self.server.client(connect, session_timeout_ms=session_timeout_ms)
        self.result(client.start())
        return client

    def states(self, client: MemoryZooKeeperClient) -> list[SessionState]:
        seen: list[SessionState] = []
        client.add_state_listener(seen.append)
        return seen


@pytest.fixture
def h() -> Harness:
    return Harness()


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9092),), 1)


def test_nothing_happens_until_the_reactor_turns(h):
    """Requests execute and results fire only from the reactor (``advance(0)``), in order."""
    zk = h.started()
    order: list[str] = []
    first = zk.create("/a", b"1").addCallback(lambda p: order.append("create " + p))
    second = zk.get("/a").addCallback(lambda r: order.append("get " + r[0].decode()))
    assert order == [] and h.server.dump("/kafka/a") == {}
    h.clock.advance(0)
    assert order == ["create /a", "get 1"] and first.called and second.called


def test_watch_deliveries_follow_the_change_in_a_later_turn_and_coalesce(h):
    """A watch re-reads in the turn after a change, so changes made in one turn arrive as one
    delivery of the final state (a real ZooKeeper's one-shot watch re-read does the same)."""
    zk = h.started()
    h.result(zk.create("/w"))
    seen: list[list[str]] = []
    data: list[Any] = []
    h.result(zk.watch_children("/w", seen.append))
    h.result(zk.watch_data("/w", lambda d, s: data.append((d, s and s.version))))
    assert seen == [[]] and data == [(b"", 0)]
    for name in ("c", "a", "b"):
        zk.create("/w/" + name)
    zk.set("/w", b"x")
    zk.set("/w", b"y")
    h.clock.advance(0)
    assert seen[1:] in ([["c"], ["a", "c"], ["a", "b", "c"]], [["a", "b", "c"]])
    assert seen[-1] == ["a", "b", "c"] and data[-1] == (b"y", 2)


def test_failed_answer_after_apply_is_resent_and_meets_its_own_write(h):
    """fail_next(applied=True, ConnectionLossError): the create happened but the answer was
    lost; the connection drops and comes back (SUSPENDED, CONNECTED), the client re-sends and
    gets NodeExistsError, as against a real server."""
    zk = h.started()
    states = h.states(zk)
    h.server.fail_next("/x", ConnectionLossError, applied=True, client=zk)
    with pytest.raises(NodeExistsError):
        h.result(zk.create("/x", b"v"))
    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
    assert h.server.dump("/kafka/x") == {"/kafka/x": b"v"}


def test_registration_whose_answer_was_lost_is_confirmed_by_owner(h):
    """The broker registration multi is applied but its answer lost: the re-sent create meets
    NodeExists, the owner check finds our own session, and registration succeeds with the
    node's czxid (Kafka's CheckedEphemeral behaviour)."""
    kzc = KafkaZkClient(zk=h.server.client("memory/kafka"))
    h.result(kzc.start())
    h.server.fail_next("/brokers/ids/1", ConnectionLossError, applied=True, client=kzc.zk)
    czxid = h.result(kzc.register_broker(registration(1)))
    stat = h.server.stat("/kafka/brokers/ids/1")
    assert stat is not None and stat.czxid == czxid and stat.ephemeralOwner == kzc.zk.session_id


def test_fail_next_without_apply_counts_and_filters_by_client(h):
    """An injected error replaces the answer and leaves the tree alone; ``count`` requests
    fail, then the path works; another client's requests are not affected."""
    zk, other = h.started(), h.started()
    h.server.fail_next("/p", NoNodeError("injected", "/p"), count=2, client=zk)
    h.result(other.create("/p", b"theirs"))
    for _ in range(2):
        with pytest.raises(NoNodeError, match="injected"):
            h.result(zk.get("/p"))
    assert h.result(zk.get("/p"))[0] == b"theirs"
    h.server.fail_next("/kafka/q", ZkError)  # absolute path, any client
    with pytest.raises(ZkError):
        h.result(other.multi([CreateOp("/z"), CreateOp("/q")]))
    assert h.server.dump("/kafka/z") == {}


def test_disconnect_expires_after_the_session_timeout_on_the_clock(h):
    """A disconnected session lives for its timeout on the reactor's clock: its ephemeral
    stays just before, goes at the timeout (others' watches see it); the client learns LOST
    and NEW_SESSION only when it reconnects, and its waiting request runs in the new session."""
    zk, other = h.started(session_timeout_ms=6000), h.started()
    h.result(zk.create("/e", b"", ephemeral=True))
    seen: list[list[str]] = []
    h.result(other.watch_children("/", seen.append))
    states = h.states(zk)
    old = zk.session_id
    h.server.disconnect(zk)
    answered: list[Any] = []
    zk.create("/later", b"").addBoth(answered.append)
    h.clock.advance(5.9)
    assert states == [SessionState.SUSPENDED] and "e" in seen[-1] and answered == []
    h.clock.advance(0.2)
    assert "e" not in seen[-1] and old not in h.server.live_sessions()
    h.server.reconnect(zk)
    h.clock.advance(0)
    assert answered == ["/later"]
    assert states == [SessionState.SUSPENDED, SessionState.LOST, SessionState.NEW_SESSION]
    assert zk.session_id != old


def test_reconnect_within_the_timeout_keeps_the_session(h):
    """Reconnecting before the timeout cancels the expiry: advancing past it later changes nothing."""
    zk = h.started(session_timeout_ms=2000)
    h.result(zk.create("/e", b"", ephemeral=True))
    states = h.states(zk)
    h.server.disconnect(zk)
    h.clock.advance(1.0)
    h.server.reconnect(zk)
    h.clock.advance(10.0)
    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
    assert h.server.stat("/kafka/e").ephemeralOwner == zk.session_id


def test_expiry_of_a_disconnected_client_is_learnt_on_reconnect(h):
    """expire_session while cut off: the ephemeral goes now, LOST/NEW_SESSION come on reconnect."""
    zk = h.started()
    h.result(zk.create("/e", b"", ephemeral=True))
    states = h.states(zk)
    h.server.disconnect(zk)
    h.clock.advance(0)
    h.server.expire_session(zk)
    h.clock.advance(0)
    assert h.server.stat("/kafka/e") is None and states == [SessionState.SUSPENDED]
    h.server.reconnect(zk)
    h.clock.advance(0)
    assert states == [SessionState.SUSPENDED, SessionState.LOST, SessionState.NEW_SESSION]


def test_stop_while_disconnected_leaves_the_session_to_its_timeout(h):
    """A client that stops while cut off cannot close its session: its ephemerals go only
    when the session times out (as a real server does); requests after stop are refused."""
    zk = h.started(session_timeout_ms=3000)
    h.result(zk.create("/e", b"", ephemeral=True))
    h.server.disconnect(zk)
    assert h.result(zk.stop()) is True
    assert h.server.stat("/kafka/e") is not None
    h.clock.advance(3.0)
    assert h.server.stat("/kafka/e") is None
    with pytest.raises(ClientClosedError):
        h.result(zk.get("/"))


def test_duplicate_broker_id_refused_after_waiting_on_the_reactor_clock(h):
    """Registration waits for a foreign owner's possible expiry on the reactor's clock (so a
    test clock drives it) and then fails with BrokerIdInUseError."""
    a = KafkaZkClient(zk=h.server.client("memory/kafka"))
    b = KafkaZkClient(zk=h.server.client("memory/kafka", session_timeout_ms=1000),
                      registration_grace_ms=500)
    h.result(a.start())
    h.result(b.start())
    h.result(a.register_broker(registration(1)))
    outcome: list[Any] = []
    b.register_broker(registration(1)).addBoth(outcome.append)
    h.clock.pump([0.1] * 14)
    assert outcome == []
    h.clock.pump([0.1] * 3)
    assert len(outcome) == 1 and isinstance(outcome[0].value, BrokerIdInUseError)


def test_zxids_count_sessions_and_failed_writes(h):
    """One zxid per transaction: session open and close, each write (also a failed one), each
    multi (shared by its ops); reads take none."""
    before = h.server.last_zxid
    zk = h.started("memory")  # no chroot: opening the session is the only transaction
    assert h.server.last_zxid == before + 1
    h.result(zk.create("/a"))
    with pytest.raises(NodeExistsError):
        h.result(zk.create("/a"))
    h.result(zk.get("/a"))
    results = h.result(zk.multi([CreateOp("/b"), SetDataOp("/b", b"1", 0)]))
    assert results[1].czxid == results[1].mzxid == before + 4 == h.server.last_zxid
    h.result(zk.stop())
    assert h.server.last_zxid == before + 5


def test_data_over_jute_maxbuffer_is_refused_with_a_reason(h):
    """A real server drops the connection on oversized data; the fake says why instead."""
    zk = h.started()
    with pytest.raises(ZkError, match="jute.maxbuffer"):
        h.result(zk.create("/big", b"x" * (JUTE_MAX_BUFFER + 1)))
    assert h.server.dump("/kafka/big") == {}


def test_runs_on_a_plain_task_clock():
    """A ``task.Clock`` is enough (no MemoryReactor needed): the whole Kafka layer works on it."""
    clock = Clock()
    server = MemoryZooKeeperServer(clock)
    kzc = KafkaZkClient(zk=server.client("memory/kafka"))
    done: list[Any] = []

    @defer.inlineCallbacks
    def scenario() -> Any:
        yield kzc.start()
        yield kzc.create_persistent_paths()
        won = yield kzc.elect_controller(1)
        block = yield kzc.allocate_producer_id_block(1)
        return won.won, block
    scenario().addBoth(done.append)
    clock.advance(0)
    assert done == [(True, (0, 999))]


def test_kafka_zk_client_needs_exactly_one_session_source():
    """KafkaZkClient takes a connect string or an existing session, never both or neither."""
    server = MemoryZooKeeperServer(Clock())
    with pytest.raises(TypeError):
        KafkaZkClient()
    with pytest.raises(TypeError):
        KafkaZkClient("127.0.0.1:2181", zk=server.client())


def test_in_memory_tier_does_not_import_kazoo():
    """The package, the fake and KafkaZkClient over it load without kazoo (it is imported only
    when a kazoo-backed client is asked for)."""
    code = ("import sys\n"
            "from twisted.internet.task import Clock\n"
            "from kafkalite.coordination import KafkaZkClient, MemoryZooKeeperServer\n"
            "KafkaZkClient(zk=MemoryZooKeeperServer(Clock()).client())\n"
            "assert 'kazoo' not in sys.modules, sorted(m for m in sys.modules if 'kazoo' in m)\n"
            "from kafkalite.coordination import ZooKeeperClient\n"
            "assert 'kazoo' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("bad", [lambda zk: zk.create("/x", "text"),
                                 lambda zk: zk.set("/x", b"", version="1"),
                                 lambda zk: zk.create("/a/../b")])
def test_argument_errors_fail_the_deferred(h, bad: Callable[[MemoryZooKeeperClient], Any]):
    """Bad arguments fail the returned Deferred (as kazoo's checks do), nothing is sent."""
    zk = h.started()
    before = h.server.last_zxid
    with pytest.raises((TypeError, ValueError)):
        h.result(bad(zk))
    assert h.server.last_zxid == before
