"""kafkalite.coordination on a real ZooKeeper and on the in-memory one: one set of assertions.

Every behavioural test takes the ``backend`` fixture and runs twice: ``real`` (kazoo's
``ZooKeeperClient`` against the session's ZooKeeper process, each client through its own
cuttable :class:`~tests.support.tcp_proxy.TcpProxy`) and ``memory``
(:class:`~kafkalite.coordination.memory.MemoryZooKeeperClient` sessions on one
``MemoryZooKeeperServer``). Passing on both is what shows the fake behaves like the real
thing for everything the broker relies on; the fake's own, clock-driven tests are in
``tests/unit/coordination``.

Reactor choice: one *private* reactor instance (not the global ``twisted.internet.reactor``)
runs in a daemon thread for this module, so other test modules can still use the global
reactor or ``task.Clock``. Test code (the pytest thread) hands work to it with
``callFromThread`` and blocks on the outcome, which keeps the rule that every coordination
call runs in the reactor thread. The in-memory ZooKeeper runs on that same reactor. Every
test uses its own chroot, so tests share one ZooKeeper without seeing each other's znodes.
"""
from __future__ import annotations

import abc
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from twisted.internet import defer
from twisted.internet.epollreactor import EPollReactor

from kafkalite.coordination import (BadArgumentsError, BadVersionError, ControllerFence,
                                    BrokerIdInUseError, CheckOp, ClientClosedError,
                                    ControllerMovedError, CreateOp, DeleteOp, InvalidTopicError,
                                    KafkaZkClient, MemoryZooKeeperServer,
                                    NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
                                    NotEmptyError, RolledBackError, RuntimeInconsistencyError,
                                    SessionState, SetDataOp, TopicAlreadyExistsError,
                                    TransactionFailedError, Updated, ZkVersionConflictError,
                                    ZooKeeper, election)
from kafkalite.metadata import LeaderAndIsr
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_for
from tests.support.zookeeper import ZooKeeperServer, expire_session
from zk_schema import PERSISTENT_PATHS, BrokerRegistration, ClusterIdZNode, EndPoint, TopicZNode


class ReactorThread:
    """A private reactor running in a background thread; ``call`` runs fn there and waits."""

    def __init__(self) -> None:
        self.reactor = EPollReactor()
        self.thread = threading.Thread(target=self.reactor.run,
                                       kwargs={"installSignalHandlers": False},
                                       name="test-reactor", daemon=True)

    def start(self) -> None:
        self.thread.start()
        self.call(lambda: None)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30.0, **kwargs: Any) -> Any:
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            d = defer.maybeDeferred(fn, *args, **kwargs)

            def ok(value: Any) -> None:
                box["value"] = value
                done.set()

            def err(f: Any) -> None:
                box["failure"] = f
                done.set()
            d.addCallbacks(ok, err)
        self.reactor.callFromThread(run)
        if not done.wait(timeout):
            raise TimeoutError(f"{fn!r} did not finish in {timeout} s")
        if "failure" in box:
            box["failure"].raiseException()
        return box["value"]

    def stop(self) -> None:
        self.reactor.callFromThread(self.reactor.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def rt() -> Iterator[ReactorThread]:
    thread = ReactorThread()
    thread.start()
    yield thread
    thread.stop()


class Backend(abc.ABC):
    """Makes started KafkaZkClients and injects faults, the same way for both implementations."""

    name = ""

    def __init__(self, rt: ReactorThread) -> None:
        self.rt = rt
        self.made: list[KafkaZkClient] = []

    def client(self, chroot: str | None, session_timeout_ms: int = 2000,
               registration_grace_ms: int = 3000) -> KafkaZkClient:
        client = self._make(chroot, session_timeout_ms, registration_grace_ms)
        self.made.append(client)
        self.rt.call(client.start)
        return client

    @abc.abstractmethod
    def _make(self, chroot: str | None, session_timeout_ms: int,
              registration_grace_ms: int) -> KafkaZkClient:
        """A KafkaZkClient, not started."""

    @abc.abstractmethod
    def expire(self, client: KafkaZkClient) -> None:
        """The server expires the client's session (as after a long pause)."""

    @abc.abstractmethod
    def disconnect(self, client: KafkaZkClient) -> None:
        """The client's connection breaks; its session lives on until its timeout."""

    @abc.abstractmethod
    def reconnect(self, client: KafkaZkClient) -> None:
        """The connection can be made again (the client reconnects by itself)."""

    def close(self) -> None:
        for client in self.made:
            self.rt.call(client.stop)


class RealBackend(Backend):
    name = "real"

    def __init__(self, rt: ReactorThread, zookeeper: ZooKeeperServer) -> None:
        super().__init__(rt)
        self.zookeeper = zookeeper
        self.proxies: dict[int, TcpProxy] = {}

    def _make(self, chroot: str | None, session_timeout_ms: int,
              registration_grace_ms: int) -> KafkaZkClient:
        proxy = TcpProxy(self.zookeeper.host, self.zookeeper.port)
        client = KafkaZkClient(proxy.address + (chroot or ""), session_timeout_ms=session_timeout_ms,
                               connect_timeout_ms=10000, reactor=self.rt.reactor,
                               registration_grace_ms=registration_grace_ms)
        self.proxies[id(client)] = proxy
        return client

    def expire(self, client: KafkaZkClient) -> None:
        expire_session(self.rt.call(lambda: client.zk.kazoo_client_id),  # type: ignore[attr-defined]
                       self.zookeeper.hosts)

    def disconnect(self, client: KafkaZkClient) -> None:
        self.proxies[id(client)].cut()

    def reconnect(self, client: KafkaZkClient) -> None:
        self.proxies[id(client)].restore()

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.restore()
        super().close()
        for proxy in self.proxies.values():
            proxy.close()


class MemoryBackend(Backend):
    name = "memory"

    def __init__(self, rt: ReactorThread) -> None:
        super().__init__(rt)
        self.server = MemoryZooKeeperServer(rt.reactor)

    def _make(self, chroot: str | None, session_timeout_ms: int,
              registration_grace_ms: int) -> KafkaZkClient:
        zk = self.server.client("memory" + (chroot or ""), session_timeout_ms=session_timeout_ms)
        return KafkaZkClient(zk=zk, registration_grace_ms=registration_grace_ms)

    def expire(self, client: KafkaZkClient) -> None:
        self.rt.call(self.server.expire_session, client.zk)

    def disconnect(self, client: KafkaZkClient) -> None:
        self.rt.call(self.server.disconnect, client.zk)

    def reconnect(self, client: KafkaZkClient) -> None:
        self.rt.call(self.server.reconnect, client.zk)


@pytest.fixture(params=["real", "memory"])
def backend(request: pytest.FixtureRequest, rt: ReactorThread) -> Iterator[Backend]:
    made: Backend
    if request.param == "real":
        made = RealBackend(rt, request.getfixturevalue("zookeeper"))
    else:
        made = MemoryBackend(rt)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def chroot() -> str:
    return f"/test_{uuid.uuid4().hex[:12]}"


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port),),
                              timestamp_ms=1700000000000 + broker_id)


def watch_brokers(kzc: KafkaZkClient, callback: Callable[[list[int]], None]) -> defer.Deferred:
    """The live broker ids, now and on every join or leave (as the broker's metadata sync watches them)."""
    return kzc.zk.watch_children("/brokers/ids", lambda ids: callback(sorted(int(i) for i in ids)))


def failure_of(rt: ReactorThread, fn: Callable[..., Any], *args: Any) -> BaseException:
    """The exception ``fn(*args)``'s Deferred fails with (AssertionError if it succeeds)."""
    try:
        value = rt.call(fn, *args)
    except BaseException as exc:  # noqa: BLE001 - the point is to return it
        return exc
    raise AssertionError(f"{fn!r}{args!r} succeeded with {value!r}")


# ---- the session API, znode by znode ----------------------------------------------------------

def test_both_implementations_satisfy_the_protocol(backend, chroot):
    """Whatever the backend, the session under KafkaZkClient is a coordination ZooKeeper."""
    zk = backend.client(chroot).zk
    assert isinstance(zk, ZooKeeper)
    assert zk.chroot == chroot and zk.session_id and zk.state is SessionState.CONNECTED


def test_persistent_paths_and_chroot_created(backend):
    """A chrooted connect string creates the chroot, and Kafka's startup paths land inside it."""
    chroot = f"/kafka_{uuid.uuid4().hex[:8]}/nested"
    kzc = backend.client(chroot)
    backend.rt.call(kzc.create_persistent_paths)
    backend.rt.call(kzc.create_persistent_paths)  # idempotent
    raw = backend.client(None).zk
    for path in PERSISTENT_PATHS:
        assert backend.rt.call(raw.exists, chroot + path) is not None, path
    assert backend.rt.call(raw.exists, "/brokers") is None  # nothing leaked outside the chroot
    assert sorted(backend.rt.call(raw.get_children, chroot)) == sorted(
        {p.split("/")[1] for p in PERSISTENT_PATHS})


def test_stats_versions_and_zxids(backend, chroot):
    """Stats move as ZooKeeper's do: version on data changes, cversion/numChildren/pzxid on
    child changes (creations and deletions), ephemeralOwner, dataLength; one zxid per
    transaction (so a multi's create + setData share it), increasing across transactions."""
    rt, zk = backend.rt, backend.client(chroot).zk
    rt.call(zk.create, "/n", b"abc")
    _, st = rt.call(zk.get, "/n")
    assert (st.version, st.cversion, st.numChildren, st.dataLength, st.ephemeralOwner) == (0, 0, 0, 3, 0)
    assert st.czxid == st.mzxid == st.pzxid
    changed = rt.call(zk.set, "/n", b"abcd")
    assert changed.version == 1 and changed.mzxid > st.czxid and changed.czxid == st.czxid
    assert changed.dataLength == 4 and changed.ctime == st.ctime
    rt.call(zk.create, "/n/c", b"")
    child = rt.call(zk.exists, "/n/c")
    parent = rt.call(zk.exists, "/n")
    assert (parent.cversion, parent.numChildren, parent.pzxid) == (1, 1, child.czxid)
    assert parent.mzxid == changed.mzxid  # a child does not touch the parent's data
    rt.call(zk.delete, "/n/c")
    parent = rt.call(zk.exists, "/n")
    assert (parent.cversion, parent.numChildren) == (2, 0) and parent.pzxid > child.czxid
    rt.call(zk.create, "/e", b"", True)
    assert rt.call(zk.exists, "/e").ephemeralOwner == zk.session_id
    results = rt.call(zk.multi, [CreateOp("/m", b""), SetDataOp("/m", b"xy", 0)])
    assert results[0] == "/m" and results[1].version == 1
    assert results[1].czxid == results[1].mzxid > parent.pzxid


def test_sequence_suffix_counts_child_creations(backend, chroot):
    """A sequential name's 10-digit suffix is the number of children ever created under the
    parent: deletions never free a number, multi-ops and ephemerals count like the rest."""
    rt, zk = backend.rt, backend.client(chroot).zk
    rt.call(zk.create, "/p")
    rt.call(zk.create, "/p/a")
    rt.call(zk.delete, "/p/a")
    assert rt.call(zk.create, "/p/s-", b"", False, True) == "/p/s-0000000001"
    second = rt.call(zk.create, "/p/s-", b"", True, True)
    assert second == "/p/s-0000000002"
    assert rt.call(zk.exists, second).ephemeralOwner == zk.session_id
    rt.call(zk.delete, second)
    results = rt.call(zk.multi, [CreateOp("/p/x"), CreateOp("/p/s-", sequence=True)])
    assert results == ["/p/x", "/p/s-0000000004"]
    assert rt.call(zk.create, "/q/", b"", False, True, True) == "/q/0000000000"  # makepath
    assert sorted(rt.call(zk.get_children, "/p")) == ["s-0000000001", "s-0000000004", "x"]


def test_error_contract_and_path_rules(backend, chroot):
    """Each refusal is the same typed error with the same text on both; paths normalize as
    kazoo's (``//`` and a trailing ``/`` collapse, ``..`` is a ValueError)."""
    rt, zk = backend.rt, backend.client(chroot).zk
    rt.call(zk.create, "/x", b"1")
    rt.call(zk.create, "/x/y", b"")
    rt.call(zk.create, "/eph", b"", True)
    cases: list[tuple[Callable[..., Any], tuple[Any, ...], type[BaseException], str]] = [
        (zk.create, ("/x",), NodeExistsError, "NodeExistsError (/x)"),
        (zk.create, ("/none/z",), NoNodeError, "NoNodeError (/none/z)"),
        (zk.get, ("/none",), NoNodeError, "NoNodeError (/none)"),
        (zk.set, ("/none", b""), NoNodeError, "NoNodeError (/none)"),
        (zk.set, ("/x", b"", 7), BadVersionError, "BadVersionError (/x)"),
        (zk.delete, ("/x", 7), BadVersionError, "BadVersionError (/x)"),
        (zk.delete, ("/x",), NotEmptyError, "NotEmptyError (/x)"),
        (zk.delete, ("/none",), NoNodeError, "NoNodeError (/none)"),
        (zk.create, ("/eph/c",), NoChildrenForEphemeralsError,
         "NoChildrenForEphemeralsError (/eph/c)"),
        (zk.create, ("/x/../y",), ValueError, "relative paths not allowed"),
        (zk.create, ("/s", "text"), TypeError, "Invalid type for 'value' (must be a byte string)"),
        (zk.get_children, ("/none",), NoNodeError, "NoNodeError (/none)"),
    ]
    for fn, args, kind, text in cases:
        exc = failure_of(rt, fn, *args)
        assert type(exc) is kind and str(exc) == text, (fn.__name__, args, exc)
    root = backend.client(None).zk
    assert isinstance(failure_of(rt, root.delete, "/"), BadArgumentsError)
    assert rt.call(zk.create, "/x//z/") == "/x/z"
    assert rt.call(zk.get, "/x/z/")[0] == b""
    assert rt.call(zk.exists, "/none") is None
    assert rt.call(zk.get_or_none, "/none") == (None, None)
    assert rt.call(zk.delete, "/x/z") is True


def test_multi_results_contract(backend, chroot):
    """A multi answers one result per op (created path without the chroot, new stat, True,
    True); a failed one changes nothing and reports RolledBack before the failing op, that
    op's own error, RuntimeInconsistency after it."""
    rt, zk = backend.rt, backend.client(chroot).zk
    rt.call(zk.create, "/c", b"")
    results = rt.call(zk.multi, [CreateOp("/a", b"1"), SetDataOp("/a", b"22", 0),
                                 CheckOp("/a", 1), DeleteOp("/c", 0)])
    assert results[0] == "/a" and results[1].version == 1 and results[2:] == [True, True]
    assert rt.call(zk.exists, "/c") is None
    before = rt.call(zk.get, "/a")
    with pytest.raises(TransactionFailedError) as info:
        rt.call(zk.multi, [CreateOp("/b"), SetDataOp("/a", b"3", 1), CheckOp("/a", 5),
                           DeleteOp("/a"), CreateOp("/d")])
    exc = info.value
    assert exc.index == 2 and exc.op == CheckOp("/a", 5)
    assert type(exc.error) is BadVersionError and str(exc.error) == "BadVersionError (/a)"
    assert [type(r) for r in exc.results] == [RolledBackError, RolledBackError, BadVersionError,
                                              RuntimeInconsistencyError, RuntimeInconsistencyError]
    assert rt.call(zk.exists, "/b") is None and rt.call(zk.get, "/a") == before
    assert rt.call(zk.multi, []) == []


def test_raw_client_multi_reports_failed_op(backend, chroot):
    """A multi-op whose second op fails is rolled back and reported, never silently ignored."""
    rt, zk = backend.rt, backend.client(chroot).zk
    with pytest.raises(TransactionFailedError) as info:
        rt.call(zk.multi, [CreateOp("/a"), SetDataOp("/missing", b"x")])
    assert info.value.index == 1 and isinstance(info.value.error, NoNodeError)
    assert rt.call(zk.exists, "/a") is None


def test_children_listing_and_recursive_delete(backend, chroot):
    """get_children(include_data) gives the names and the parent's stat; delete_recursive
    removes a subtree (True) and is a no-op on a missing path (False)."""
    rt, zk = backend.rt, backend.client(chroot).zk
    for path in ("/t/a/1", "/t/a/2", "/t/b"):
        rt.call(zk.create, path, b"v", False, False, True)
    names, stat = rt.call(zk.get_children, "/t", True)
    assert sorted(names) == ["a", "b"] and stat.numChildren == 2
    assert rt.call(zk.delete_recursive, "/t") is True
    assert rt.call(zk.exists, "/t") is None
    assert rt.call(zk.delete_recursive, "/t") is False
    rt.call(zk.ensure_path, "/u/v")
    rt.call(zk.ensure_path, "/u/v")
    assert rt.call(zk.get, "/u")[0] == b"" and rt.call(zk.exists, "/u/v") is not None


def test_children_watch_semantics(backend, chroot):
    """A children watch delivers sorted names at once and after each change, ends silently
    when its node is deleted (a later node at that path is not watched), and cancel() stops
    it; watching a missing node is NoNodeError. Deliveries to one client follow the order of
    the changes, so a change seen by a second watch is a barrier for the first."""
    rt, zk = backend.rt, backend.client(chroot).zk
    other = backend.client(chroot).zk
    assert isinstance(failure_of(rt, zk.watch_children, "/w", lambda c: None), NoNodeError)
    rt.call(zk.create, "/w")
    rt.call(zk.create, "/bar")
    seen: list[list[str]] = []
    barrier: list[list[str]] = []
    rt.call(zk.watch_children, "/w", seen.append)
    assert seen == [[]]  # the initial delivery precedes the handle
    rt.call(zk.watch_children, "/bar", barrier.append)
    rt.call(other.create, "/w/b")
    wait_for(lambda: seen[-1] == ["b"], what="child b")
    rt.call(other.create, "/w/a")
    wait_for(lambda: seen[-1] == ["a", "b"], what="children sorted")
    rt.call(other.delete, "/w/a")
    rt.call(other.delete, "/w/b")
    wait_for(lambda: seen[-1] == [], what="children gone")
    deliveries = len(seen)
    rt.call(other.delete, "/w")
    rt.call(other.create, "/bar/1")
    wait_for(lambda: barrier[-1] == ["1"], what="barrier after the deletion")
    rt.call(other.create, "/w")
    rt.call(other.create, "/w/again")
    rt.call(other.create, "/bar/2")
    wait_for(lambda: barrier[-1] == ["1", "2"], what="barrier after the re-creation")
    assert len(seen) == deliveries  # nothing on deletion, nothing for the new node

    cancelled: list[list[str]] = []
    handle = rt.call(zk.watch_children, "/w", cancelled.append)
    handle.cancel()
    rt.call(other.create, "/w/after-cancel")
    rt.call(other.create, "/bar/3")
    wait_for(lambda: barrier[-1] == ["1", "2", "3"], what="barrier after cancel")
    assert cancelled == [["again"]]


def test_data_watch_semantics(backend, chroot):
    """A data watch delivers (None, None) while the node is absent, (data, stat) after its
    creation and each change, (None, None) after deletion; cancel() stops it."""
    rt, zk = backend.rt, backend.client(chroot).zk
    other = backend.client(chroot).zk
    seen: list[tuple[Any, Any]] = []
    handle = rt.call(zk.watch_data, "/d", lambda data, stat: seen.append((data, stat)))
    assert seen == [(None, None)]
    rt.call(other.create, "/d", b"one")
    wait_for(lambda: seen[-1][0] == b"one", what="creation")
    assert seen[-1][1].version == 0
    rt.call(other.set, "/d", b"two")
    wait_for(lambda: seen[-1][0] == b"two", what="change")
    assert seen[-1][1].version == 1
    rt.call(other.delete, "/d")
    wait_for(lambda: seen[-1] == (None, None) and len(seen) == 4, what="deletion")
    handle.cancel()
    barrier: list[Any] = []
    rt.call(zk.watch_data, "/d", lambda data, stat: barrier.append(data))
    rt.call(other.create, "/d", b"three")
    wait_for(lambda: barrier[-1] == b"three", what="barrier")
    assert len(seen) == 4


def test_data_watches_re_read_changed_nodes_together(backend, chroot):
    """After a burst of changes (a controller rewriting many partition states), each watch
    delivers its node's new data, and the re-reads are in flight together: kazoo's own DataWatch
    re-read one node per ZooKeeper round trip, blocking kazoo's callback thread."""
    if backend.name != "real":
        pytest.skip("the in-memory ZooKeeper answers synchronously: nothing is in flight")
    rt, zkc, other = backend.rt, backend.client(chroot).zk, backend.client(chroot).zk
    nodes = [f"/w{i}" for i in range(200)]
    rt.call(lambda: defer.gatherResults([other.create(n, b"0") for n in nodes]))
    latest: dict[str, bytes | None] = {}
    for n in nodes:
        rt.call(zkc.watch_data, n, lambda data, stat, n=n: latest.__setitem__(n, data))
    kazoo = zkc._zk
    lock = threading.Lock()
    unanswered: list[Any] = []       # reads issued and not answered yet
    most = [0]
    real_get_async = kazoo.get_async

    def counted_get_async(path: str, watch: Any = None) -> Any:
        result = real_get_async(path, watch)
        with lock:
            unanswered[:] = [r for r in unanswered if not r.ready()] + [result]
            most[0] = max(most[0], len(unanswered))
        return result
    kazoo.get_async = counted_get_async
    rt.call(lambda: defer.gatherResults([other.set(n, b"1") for n in nodes]))
    wait_for(lambda: all(latest[n] == b"1" for n in nodes), what="every watch's new data")
    assert most[0] > 1, "the re-reads went one at a time"


def test_a_reconnection_re_reads_every_data_watch_without_a_thread_each(backend, chroot):
    """kazoo's DataWatch started a thread per watch on every reconnection (30,000 partitions
    made 21,856 threads in one broker, then "can't start new thread"). Ours queues the re-reads:
    after a cut, every watch delivers what changed meanwhile and the thread count stays flat."""
    if backend.name != "real":
        pytest.skip("the in-memory ZooKeeper has no connection to lose")
    rt = backend.rt
    kzc = backend.client(chroot, session_timeout_ms=6000)
    zk, other = kzc.zk, backend.client(chroot).zk
    nodes = [f"/r{i}" for i in range(300)]
    rt.call(lambda: defer.gatherResults([other.create(n, b"0") for n in nodes]))
    latest: dict[str, bytes | None] = {}
    for n in nodes:
        rt.call(zk.watch_data, n, lambda data, stat, n=n: latest.__setitem__(n, data))
    states: list[SessionState] = []
    zk.add_state_listener(states.append)
    before = threading.active_count()
    most = [before]
    stop = threading.Event()

    def count_threads() -> None:
        while not stop.is_set():
            most[0] = max(most[0], threading.active_count())
            time.sleep(0.001)
    counter = threading.Thread(target=count_threads)
    counter.start()
    try:
        backend.disconnect(kzc)
        wait_for(lambda: SessionState.SUSPENDED in states, what="SUSPENDED")
        rt.call(lambda: defer.gatherResults([other.set(n, b"cut") for n in nodes]))
        backend.reconnect(kzc)
        wait_for(lambda: SessionState.CONNECTED in states, what="CONNECTED")
        wait_for(lambda: all(latest[n] == b"cut" for n in nodes), what="every watch's change made while cut")
    finally:
        stop.set()
        counter.join()
    assert most[0] - before < 20, f"{most[0] - before} threads started for {len(nodes)} watches"


# ---- sessions and faults ----------------------------------------------------------------------

def test_disconnect_and_reconnect_keeps_the_session(backend, chroot):
    """A broken connection is SUSPENDED then CONNECTED in the same session: our ephemeral
    survives, a request made while cut completes after the reconnect, and a watch delivers
    what changed meanwhile."""
    rt = backend.rt
    kzc = backend.client(chroot, session_timeout_ms=6000)
    zk, other = kzc.zk, backend.client(chroot).zk
    states: list[SessionState] = []
    zk.add_state_listener(states.append)
    rt.call(zk.create, "/mine", b"", True)
    rt.call(other.create, "/shared", b"0")
    seen: list[Any] = []
    rt.call(zk.watch_data, "/shared", lambda data, stat: seen.append(data))
    session = zk.session_id
    backend.disconnect(kzc)
    wait_for(lambda: SessionState.SUSPENDED in states, what="SUSPENDED")
    box: list[Any] = []
    rt.reactor.callFromThread(lambda: zk.set("/mine", b"sent while cut").addBoth(box.append))
    rt.call(other.set, "/shared", b"changed while cut")  # a full round trip for the others...
    assert box == []  # ...while ours waits for its connection
    backend.reconnect(kzc)
    wait_for(lambda: box, what="the request made while cut")
    assert box[0].version == 1
    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
    assert zk.session_id == session
    assert rt.call(other.exists, "/mine").ephemeralOwner == session
    wait_for(lambda: seen[-1] == b"changed while cut", what="the change made while cut")


def test_disconnect_beyond_the_session_timeout_expires_it(backend, chroot):
    """A client cut off longer than its session timeout loses its ephemerals (others see it
    at once); when it is back it sees LOST then NEW_SESSION and re-registers."""
    rt = backend.rt
    kzc = backend.client(chroot, session_timeout_ms=2000)
    watcher = backend.client(chroot)
    rt.call(watcher.create_persistent_paths)
    brokers: list[list[int]] = []
    rt.call(watch_brokers, watcher, brokers.append)
    states: list[SessionState] = []
    recreated: list[tuple[str, int]] = []
    kzc.add_state_listener(states.append)
    kzc.add_reregistration_listener(lambda path, czxid: recreated.append((path, czxid)))
    first = rt.call(kzc.register_broker, registration(4))
    wait_for(lambda: brokers[-1] == [4], what="registration seen")
    backend.disconnect(kzc)
    wait_for(lambda: brokers[-1] == [], timeout=20, what="the expired registration to vanish")
    backend.reconnect(kzc)
    wait_for(lambda: recreated, what="re-registration")
    assert states == [SessionState.SUSPENDED, SessionState.LOST, SessionState.NEW_SESSION]
    _, stat = rt.call(watcher.zk.get, "/brokers/ids/4")
    assert recreated == [("/brokers/ids/4", stat.czxid)] and stat.czxid != first
    assert stat.ephemeralOwner == kzc.zk.session_id
    wait_for(lambda: brokers[-1] == [4], what="registration seen again")


def test_stop_removes_ephemerals_and_refuses_requests(backend, chroot):
    """Stopping a client closes its session: its ephemerals are gone when stop fires, and
    later requests fail with ClientClosedError."""
    rt = backend.rt
    kzc, other = backend.client(chroot), backend.client(chroot).zk
    rt.call(kzc.zk.create, "/gone", b"", True)
    assert rt.call(kzc.stop) is True
    assert rt.call(other.exists, "/gone") is None
    assert isinstance(failure_of(rt, kzc.zk.get, "/"), ClientClosedError)


# ---- Kafka's operations -------------------------------------------------------------------------

def test_cluster_id_created_once_and_stable(backend, chroot):
    """Two brokers racing ensure_cluster_id agree; the stored payload is Kafka's JSON."""
    rt = backend.rt
    a, b = backend.client(chroot), backend.client(chroot)
    first = rt.call(lambda: defer.gatherResults([a.ensure_cluster_id(), b.ensure_cluster_id()]))
    assert first[0] == first[1] and len(first[0]) == 22
    assert rt.call(a.ensure_cluster_id) == first[0]
    data, _ = rt.call(a.zk.get, "/cluster/id")
    assert json.loads(data) == {"version": "1", "id": first[0]}
    assert ClusterIdZNode.decode(data).id == first[0]


def test_broker_registration_json_and_live_brokers_watch(backend, chroot):
    """The registration znode is ephemeral, owned by our session, holds Kafka's v5 JSON, and
    the broker watch reports joins and leaves."""
    rt = backend.rt
    a = backend.client(chroot)
    rt.call(a.create_persistent_paths)
    seen: list[list[int]] = []
    rt.call(watch_brokers, a, seen.append)
    czxid = rt.call(a.register_broker, registration(1))
    data, stat = rt.call(a.zk.get, "/brokers/ids/1")
    assert stat.ephemeralOwner == a.zk.session_id and stat.czxid == czxid
    assert json.loads(data) == {
        "version": 5, "host": "127.0.0.1", "port": 9092, "jmx_port": -1,
        "timestamp": "1700000000001", "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "features": {}}
    b = backend.client(chroot)
    rt.call(b.register_broker, registration(2, 9093))
    assert rt.call(a.get_live_brokers) == {1: registration(1), 2: registration(2, 9093)}
    wait_for(lambda: seen and seen[-1] == [1, 2], what="watch to see [1, 2]")
    rt.call(b.stop)
    wait_for(lambda: seen[-1] == [1], what="watch to see broker 2 leave")
    assert seen[0] == [] and [1, 2] in seen


def test_second_live_registration_with_same_id_refused(backend, chroot):
    """A different live session holding /brokers/ids/1 makes registration fail, after the
    bounded wait, with BrokerIdInUseError saying the id is already registered."""
    rt = backend.rt
    a = backend.client(chroot)
    rt.call(a.register_broker, registration(1))
    b = backend.client(chroot, session_timeout_ms=1000, registration_grace_ms=300)
    started = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match="broker.id 1 is already registered"):
        rt.call(b.register_broker, registration(1, 9999))
    assert time.monotonic() - started >= 1.0  # it did wait for a possible expiry first
    _, stat = rt.call(a.zk.get, "/brokers/ids/1")
    assert stat.ephemeralOwner == a.zk.session_id


def test_registration_waits_out_a_silent_previous_incarnation(backend, chroot):
    """A previous incarnation whose connection died (kill -9, partition) still owns the
    node until its session expires; the new one waits for that and then owns it."""
    rt = backend.rt
    old = backend.client(chroot, session_timeout_ms=1000)
    rt.call(old.register_broker, registration(5))
    backend.disconnect(old)
    new = backend.client(chroot, session_timeout_ms=1000, registration_grace_ms=5000)
    assert rt.call(new.zk.get, "/brokers/ids/5")[1].ephemeralOwner == old.zk.session_id
    czxid = rt.call(new.register_broker, registration(5, 9095))
    data, stat = rt.call(new.zk.get, "/brokers/ids/5")
    assert stat.ephemeralOwner == new.zk.session_id and stat.czxid == czxid
    assert json.loads(data)["port"] == 9095


@pytest.mark.parametrize("backend", ["real"], indirect=True)
def test_registration_waits_out_a_killed_previous_incarnation(backend, chroot):
    """kill -9 + fast restart: the old process's session still owns the node; we retry until
    ZooKeeper expires it and then own the node ourselves."""
    rt, zookeeper = backend.rt, backend.zookeeper
    chroot_connect = zookeeper.hosts + chroot
    script = (
        "import sys\nfrom kazoo.client import KazooClient\n"
        f"zk = KazooClient(hosts={chroot_connect!r}, timeout=1.0)\nzk.start(10)\n"
        "zk.ensure_path('/brokers/ids')\n"
        f"zk.create('/brokers/ids/5', {registration(5).encode()!r}, ephemeral=True)\n"
        "print('registered', flush=True)\nsys.stdin.read()\n")
    zk_root = backend.client(None)
    rt.call(zk_root.zk.ensure_path, chroot)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ""})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"registered"
        proc.kill()
        proc.wait(10)
        b = backend.client(chroot, session_timeout_ms=1000, registration_grace_ms=3000)
        old = rt.call(b.zk.get, "/brokers/ids/5")[1].ephemeralOwner
        assert old != b.zk.session_id
        czxid = rt.call(b.register_broker, registration(5))
        _, stat = rt.call(b.zk.get, "/brokers/ids/5")
        assert stat.ephemeralOwner == b.zk.session_id and stat.czxid == czxid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_session_expiry_reregisters_and_reports_once(backend, chroot):
    """Forced expiry: listeners see LOST and NEW_SESSION exactly once, the broker znode
    reappears owned by the new session, and the re-registration is reported."""
    rt = backend.rt
    a = backend.client(chroot)
    states: list[SessionState] = []
    recreated: list[tuple[str, int]] = []
    a.add_state_listener(states.append)
    a.add_reregistration_listener(lambda path, czxid: recreated.append((path, czxid)))
    first_czxid = rt.call(a.register_broker, registration(3))
    old_session = a.zk.session_id
    backend.expire(a)
    wait_for(lambda: recreated, what="re-registration after expiry")
    assert a.zk.session_id != old_session
    _, stat = rt.call(a.zk.get, "/brokers/ids/3")
    assert stat.ephemeralOwner == a.zk.session_id
    assert recreated == [("/brokers/ids/3", stat.czxid)] and stat.czxid != first_czxid
    assert states.count(SessionState.LOST) == 1 and states.count(SessionState.NEW_SESSION) == 1
    assert states[-1] is SessionState.NEW_SESSION
    assert all(x is not y for x, y in zip(states, states[1:]))  # once per change


def test_topic_creation_writes_kafka_znodes(backend, chroot):
    """create_topic writes /config/topics/<t> and /brokers/topics/<t> as Kafka does; duplicates
    and '.'/'_' collisions are refused; partition state, configs and deletion work."""
    rt = backend.rt
    kzc = backend.client(chroot)
    rt.call(kzc.create_persistent_paths)
    node = rt.call(kzc.create_topic, "orders.v1", {0: [1], 1: [1]}, {"retention.ms": "1000"})
    data, _ = rt.call(kzc.zk.get, "/config/topics/orders.v1")
    assert data == b'{"version":1,"config":{"retention.ms":"1000"}}'
    data, _ = rt.call(kzc.zk.get, "/brokers/topics/orders.v1")
    assert json.loads(data) == {"version": 3, "partitions": {"0": [1], "1": [1]},
                                "adding_replicas": {}, "removing_replicas": {},
                                "topic_id": node.topic_id}
    with pytest.raises(TopicAlreadyExistsError):
        rt.call(kzc.create_topic, "orders.v1", {0: [1]}, {})
    with pytest.raises(InvalidTopicError, match="collides"):
        rt.call(kzc.create_topic, "orders_v1", {0: [1]}, {})
    assert rt.call(kzc.get_all_topics) == ["orders.v1"]
    assert rt.call(kzc.get_topic_assignment, "orders.v1").value == node

    fence = rt.call(kzc.elect_controller, 1).fence
    state = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=fence.epoch)
    for p in (0, 1):
        assert rt.call(kzc.create_leader_and_isr, "orders.v1", p, state, fence) == state.with_version(0)
    data, _ = rt.call(kzc.zk.get, "/brokers/topics/orders.v1/partitions/1/state")
    assert json.loads(data) == {"version": 1, "leader": 1, "leader_epoch": 0,
                                "controller_epoch": fence.epoch, "isr": [1, 2]}
    current = rt.call(kzc.get_partition_state, "orders.v1", 0)
    assert current == state.with_version(0)
    # a leader's ISR change: no controller fence, the znode version is the fence
    shrunk = rt.call(kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((1,)))
    assert shrunk.isr == (1,) and shrunk.zk_version == 1
    # the same write again from the old version: the znode already holds it (a reply lost to a
    # connection loss), so it counts as done at the current version
    assert rt.call(kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((1,))) == shrunk
    # a different write from a stale version loses, with a typed error
    lost = failure_of(rt, kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((2,)))
    assert isinstance(lost, ZkVersionConflictError)
    assert lost.expected_version == 0 and lost.current_version == 1
    moved = rt.call(kzc.update_leader_and_isr, "orders.v1", 0,
                    LeaderAndIsr(2, 1, (2,), fence.epoch, shrunk.zk_version), fence)
    assert moved.zk_version == 2 and rt.call(kzc.get_partition_state, "orders.v1", 0) == moved

    grown = TopicZNode({0: [1], 1: [1], 2: [1]}, topic_id=node.topic_id)
    assert isinstance(rt.call(kzc.set_topic_assignment, "orders.v1", grown, 0), Updated)
    note = rt.call(kzc.set_topic_config, "orders.v1", {"cleanup.policy": "compact"})
    assert note.startswith("/config/changes/config_change_")
    assert rt.call(kzc.zk.get, note)[0] == b'{"version":2,"entity_path":"topics/orders.v1"}'
    assert rt.call(kzc.get_topic_config, "orders.v1") == {"cleanup.policy": "compact"}

    assert rt.call(kzc.mark_topic_for_deletion, "orders.v1") is True
    assert rt.call(kzc.mark_topic_for_deletion, "orders.v1") is False
    assert rt.call(kzc.get_topics_marked_for_deletion) == ["orders.v1"]
    rt.call(kzc.delete_topic, "orders.v1", fence)
    for path in ("/brokers/topics/orders.v1", "/config/topics/orders.v1",
                 "/admin/delete_topics/orders.v1"):
        assert rt.call(kzc.zk.exists, path) is None


def test_producer_id_blocks_disjoint_across_clients(backend, chroot):
    """Two brokers allocating concurrently never get overlapping producer-id blocks."""
    rt = backend.rt
    a, b = backend.client(chroot), backend.client(chroot)
    rt.call(a.create_persistent_paths)

    def race() -> defer.Deferred:
        return defer.gatherResults([c.allocate_producer_id_block(i)
                                    for i, c in ((1, a), (2, b)) for _ in range(5)])
    blocks = sorted(rt.call(race))
    assert blocks == [(i * 1000, i * 1000 + 999) for i in range(10)]
    data, _ = rt.call(a.zk.get, "/latest_producer_id_block")
    assert json.loads(data)["block_end"] == "9999"


def test_controller_election_and_fencing(backend, chroot):
    """One winner, epoch bumped; the winner's fenced writes succeed until another controller
    takes over, after which its stale epoch zkVersion makes them fail."""
    rt = backend.rt
    a, b = backend.client(chroot), backend.client(chroot)
    seen: list[int | None] = []
    rt.call(election.watch_controller, b.zk, seen.append)
    results = rt.call(lambda: defer.gatherResults([a.elect_controller(1), b.elect_controller(2)]))
    winners = [r for r in results if r.won]
    assert len(winners) == 1
    win = winners[0]
    assert win.epoch == 1 and all(r.controller_id == win.controller_id for r in results)
    assert rt.call(a.zk.get, "/controller_epoch")[0] == b"1"
    wait_for(lambda: seen and seen[-1] == win.controller_id, what="controller watch")
    winner, loser = (a, b) if win.controller_id == 1 else (b, a)
    rt.call(winner.create_persistent_paths)
    rt.call(winner.create_topic, "t", {0: [1, 2], 1: [1, 2]})
    state = LeaderAndIsr(1, 0, (1,), win.epoch)
    rt.call(winner.create_leader_and_isr, "t", 0, state, win.fence)

    rt.call(loser.zk.delete, "/controller")  # as if the winner's session ended
    wait_for(lambda: seen[-1] is None, what="controller watch to see deletion")
    second = rt.call(loser.elect_controller, 3 - win.controller_id)
    assert second.won and second.epoch == 2 and second.epoch_zk_version != win.epoch_zk_version
    with pytest.raises(ControllerMovedError):
        rt.call(winner.update_leader_and_isr, "t", 0, LeaderAndIsr(2, 1, (2,), win.epoch, 0), win.fence)
    with pytest.raises(ControllerMovedError):
        rt.call(winner.create_leader_and_isr, "t", 1, state, win.fence)
    assert rt.call(winner.get_partition_state, "t", 0) == state.with_version(0)
    assert rt.call(winner.zk.exists, "/brokers/topics/t/partitions/1/state") is None
    wait_for(lambda: seen[-1] == second.controller_id, what="controller watch to see new one")


def test_fenced_multi_reports_the_failing_op_relative_to_its_ops(backend, chroot):
    """fenced_multi strips its epoch check: results and a failing op's index are
    relative to the caller's ops; a stale token is ControllerMovedError, nothing applied."""
    rt = backend.rt
    kzc = backend.client(chroot)
    win = rt.call(kzc.elect_controller, 7)
    assert win.won
    ok = rt.call(election.fenced_multi, kzc.zk, win.epoch_zk_version, [CreateOp("/f1"), CreateOp("/f2")])
    assert ok == ["/f1", "/f2"]
    with pytest.raises(TransactionFailedError) as info:
        rt.call(election.fenced_multi, kzc.zk, win.epoch_zk_version, [CreateOp("/f3"), CreateOp("/f1")])
    assert info.value.index == 1 and isinstance(info.value.error, NodeExistsError)
    assert len(info.value.results) == 2 and rt.call(kzc.zk.exists, "/f3") is None
    with pytest.raises(ControllerMovedError):
        rt.call(election.fenced_multi, kzc.zk, win.epoch_zk_version + 1, [CreateOp("/f4")])
    assert rt.call(kzc.zk.exists, "/f4") is None


def test_log_dir_event_notifications_created_watched_read_and_deleted_fenced(backend, chroot):
    """A broker's log-dir event is Kafka's sequential znode with Kafka's JSON; the controller's
    watch sees it, reads the broker ids in order, and deletes what it consumed, fenced on its
    controller epoch (a deposed controller's delete fails and deletes nothing)."""
    rt = backend.rt
    broker, controller = backend.client(chroot), backend.client(chroot)
    rt.call(controller.create_persistent_paths)
    seen: list[list[int]] = []
    rt.call(controller.watch_log_dir_events, seen.append)
    assert rt.call(controller.get_log_dir_event_notifications) == []
    first = rt.call(broker.propagate_log_dir_event, 3)
    assert first == "/log_dir_event_notification/log_dir_event_0000000000"
    assert rt.call(broker.zk.get, first)[0] == b'{"version":1,"broker":3,"event":1}'
    rt.call(broker.propagate_log_dir_event, 3)
    rt.call(broker.propagate_log_dir_event, 4)
    rt.call(broker.zk.create, "/log_dir_event_notification/stray", b"")
    wait_for(lambda: seen and seen[-1] == [0, 1, 2], what="log dir event watch")
    sequences = rt.call(controller.get_log_dir_event_notifications)
    assert sequences == [0, 1, 2]
    assert rt.call(controller.get_broker_ids_from_log_dir_events, [2, 0, 7]) == [4, 3]

    win = rt.call(controller.elect_controller, 1)
    assert win.won
    with pytest.raises(ControllerMovedError):
        rt.call(controller.delete_log_dir_event_notifications, [0], ControllerFence(win.epoch, win.epoch_zk_version + 1))
    assert rt.call(controller.get_log_dir_event_notifications) == [0, 1, 2]
    assert rt.call(controller.delete_log_dir_event_notifications, [0, 2, 9], win.fence) == 2
    assert rt.call(controller.get_log_dir_event_notifications) == [1]
    wait_for(lambda: seen[-1] == [1], what="log dir event watch after deletion")
    assert rt.call(controller.delete_log_dir_event_notifications) == 1
    assert rt.call(controller.get_log_dir_event_notifications) == []
