"""An in-memory ZooKeeper: one shared tree, any number of sessions, driven by the reactor.

The in-process test tier runs brokers against this instead of a ZooKeeper JVM. A
:class:`MemoryZooKeeperServer` holds the tree, the zxid counter, the sessions and the
watches; each :class:`MemoryZooKeeperClient` is one session on it and a drop-in for
:class:`~kafkalite.coordination.client.ZooKeeperClient` (both are
:class:`~kafkalite.coordination.interfaces.ZooKeeper`, and share the Deferred layer in
:mod:`.session`). Semantics follow ZooKeeper 3.8 as kazoo reports it, checked by
``tests/integration/test_coordination.py``, which runs the same assertions on both:

- **Tree and stats.** One zxid counter for every transaction: each write (also a failed one),
  each multi (all its ops share one zxid), each session open and close. ``czxid``/``mzxid``/
  ``pzxid``, ``version`` (data changes), ``cversion`` (child creations *and* deletions),
  ``ephemeralOwner``, ``dataLength``, ``numChildren``; times are the reactor's clock in ms.
  A sequential node's 10-digit suffix counts the parent's earlier child *creations* (deletions
  do not reuse numbers). Paths are normalized as kazoo does (``//`` and a trailing ``/``
  collapse; ``.``/``..`` are a ValueError), then checked as the server does.
- **Multi.** Ops apply in order, each seeing the previous ones; on a failure everything is
  undone and the results are RolledBackError before the failing op, its own error, then
  RuntimeInconsistencyError, which the shared layer turns into TransactionFailedError.
- **Watches.** As kazoo's ChildrenWatch/DataWatch recipes over one-shot server watches: the
  initial delivery is queued before the install Deferred fires; a change triggers a re-read
  in a later reactor turn (so changes in one turn coalesce); children arrive sorted; a
  children watch ends silently when its node is deleted; a data watch delivers when ``mzxid``
  changed, (None, None) while the node is absent. After a reconnect or a new session every
  watch re-reads and delivers what changed meanwhile.
- **Sessions.** Closing or expiring a session deletes its ephemerals in one transaction and
  fires the other sessions' watches. A request executed while its client is disconnected
  fails with ConnectionLossError, which the shared layer re-sends once connected again.
- **Ordering.** Every request executes, and every result and delivery fires, from one FIFO
  queue pumped by ``reactor.callLater(0, ...)``: on a ``task.Clock`` or
  ``MemoryReactorClock``, ``advance(0)`` runs everything that is due, in order.

Fault injection, on the server: :meth:`~MemoryZooKeeperServer.expire_session`,
:meth:`~MemoryZooKeeperServer.disconnect` / :meth:`~MemoryZooKeeperServer.reconnect` (a
session disconnected longer than its timeout expires, as on a real server) and
:meth:`~MemoryZooKeeperServer.fail_next` (the next request(s) on a path fail with a chosen
error, before or after being applied; a ConnectionLossError also drops the connection, as a
real one would).

Deliberate differences from a real ZooKeeper: no ACLs or authentication (``aversion`` stays
0); the session timeout is used as given (no negotiation to 2..20 ticks); children lists are
sorted (the server's order is arbitrary); data over ``jute.maxbuffer`` is refused with a
ZkError saying so (the real server drops the connection, which kazoo reports as a connection
loss); the root and ``/zookeeper`` nodes exist but hold nothing (no quota or config data).
Everything runs on the reactor thread; nothing here is thread-safe, and kazoo is not imported.
"""
from __future__ import annotations

import abc
import collections
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Sequence, TypeVar, Union

from twisted.internet import defer
from twisted.python import failure

from kafkalite.coordination.connect_string import parse_connect_string
from kafkalite.coordination.errors import (BadArgumentsError, BadVersionError, ClientClosedError,
                                           ConnectionLossError, NoChildrenForEphemeralsError,
                                           NodeExistsError, NoNodeError, NotEmptyError,
                                           RolledBackError, RuntimeInconsistencyError, ZkError)
from kafkalite.coordination.interfaces import SessionState, Watch
from kafkalite.coordination.ops import CheckOp, CreateOp, DeleteOp, Op, SetDataOp
from kafkalite.coordination.session import DeferredSession

if TYPE_CHECKING:
    from kafkalite.coordination.interfaces import ZooKeeper

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ZooKeeper's default ``jute.maxbuffer``: the largest packet, so the most data a znode holds.
JUTE_MAX_BUFFER = 0xFFFFF
#: Session ids look like a real server's (server id in the top byte).
_FIRST_SESSION_ID = 0x0100_0000_0000_0000
#: Characters ZooKeeper's PathUtils refuses in a path.
_BAD_PATH_CHARS = ((0x01, 0x1F), (0x7F, 0x9F), (0xD800, 0xF8FF), (0xFFF0, 0xFFFF))

ErrorSpec = Union[type[ZkError], ZkError]


class ZnodeStat(NamedTuple):
    """A znode's stat: kazoo's ``ZnodeStat`` fields, in its order."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int  # noqa: N815 - ZooKeeper's field names
    dataLength: int  # noqa: N815
    numChildren: int  # noqa: N815
    pzxid: int

    @property
    def acl_version(self) -> int:
        return self.aversion

    @property
    def children_version(self) -> int:
        return self.cversion

    @property
    def creation_transaction_id(self) -> int:
        return self.czxid

    @property
    def last_modified_transaction_id(self) -> int:
        return self.mzxid

    @property
    def owner_session_id(self) -> int | None:
        return self.ephemeralOwner or None

    @property
    def children_count(self) -> int:
        return self.numChildren

    @property
    def data_length(self) -> int:
        return self.dataLength

    @property
    def created(self) -> float:
        return self.ctime / 1000.0

    @property
    def last_modified(self) -> float:
        return self.mtime / 1000.0


@dataclass(eq=False)
class _Znode:
    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    pzxid: int = 0
    version: int = 0
    cversion: int = 0
    creations: int = 0              # the next sequential suffix: children ever created here
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version,
                         self.cversion, 0, self.ephemeral_owner, len(self.data),
                         len(self.children), self.pzxid)

    def copy(self) -> _Znode:
        return _Znode(self.data, self.czxid, self.ctime, self.ephemeral_owner, self.mzxid,
                      self.mtime, self.pzxid, self.version, self.cversion, self.creations,
                      set(self.children))


def normalize(path: str, chroot: str | None = None, trailing: bool = False) -> str:
    """An absolute server path from a client path, with kazoo's rules (``//`` collapses, a
    trailing ``/`` is kept only for a sequential create, ``.``/``..`` are refused)."""
    if not isinstance(path, str):
        raise TypeError("Invalid type for 'path' (string expected)")
    parts = [p for p in (chroot or "").split("/") + path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError("relative paths not allowed")
    full = "/" + "/".join(parts)
    if trailing and path.endswith("/") and full != "/":
        full += "/"
    return full


def split(path: str) -> tuple[str, str]:
    """(parent, name) of an absolute path; a sequential prefix may end with '/' (empty name)."""
    i = path.rindex("/")
    return path[:i] or "/", path[i + 1:]


def _check_chars(path: str, shown: str) -> None:
    for ch in path:
        code = ord(ch)
        if code == 0 or any(lo <= code <= hi for lo, hi in _BAD_PATH_CHARS):
            raise BadArgumentsError("BadArgumentsError", shown)


def _error(kind: type[ZkError], shown: str | None) -> ZkError:
    """Our exception with the text the real client's translation gives (``NoNodeError (/p)``)."""
    names = {ConnectionLossError: "ConnectionLoss", ClientClosedError: "ConnectionClosedError",
             RuntimeInconsistencyError: "RuntimeInconsistency"}
    return kind(names.get(kind, kind.__name__), shown)


class _Txn:
    """One transaction on the tree: an undo log, and the watch events to fire on commit."""

    def __init__(self, server: MemoryZooKeeperServer, zxid: int, session_id: int) -> None:
        self.server = server
        self.zxid = zxid
        self.now_ms = server.now_ms()
        self.session_id = session_id
        self._saved: dict[str, _Znode | None] = {}
        self.events: list[tuple[str, str]] = []

    @property
    def nodes(self) -> dict[str, _Znode]:
        return self.server._nodes

    def _save(self, path: str) -> None:
        if path not in self._saved:
            node = self.nodes.get(path)
            self._saved[path] = None if node is None else node.copy()

    def rollback(self) -> None:
        for path, before in reversed(list(self._saved.items())):
            if before is None:
                self.nodes.pop(path, None)
            else:
                self.nodes[path] = before
        self._saved.clear()
        self.events.clear()

    def _node(self, path: str, shown: str) -> _Znode:
        node = self.nodes.get(path)
        if node is None:
            raise _error(NoNodeError, shown)
        return node

    def _check_size(self, data: bytes, shown: str) -> None:
        if len(data) > JUTE_MAX_BUFFER:
            raise ZkError(f"znode data of {len(data)} bytes is over jute.maxbuffer "
                          f"({JUTE_MAX_BUFFER}); a real ZooKeeper drops the connection", shown)

    def create(self, path: str, data: bytes, ephemeral: bool, sequence: bool, shown: str) -> str:
        if path == "/":
            raise _error(NodeExistsError, shown)
        _check_chars(path, shown)
        parent_path, name = split(path)
        parent = self._node(parent_path, shown)
        if sequence:
            name += f"{parent.creations:010d}"
            path = ("" if parent_path == "/" else parent_path) + "/" + name
        elif not name:
            raise _error(BadArgumentsError, shown)
        if path in self.nodes:
            raise _error(NodeExistsError, shown)
        if parent.ephemeral_owner:
            raise _error(NoChildrenForEphemeralsError, shown)
        self._check_size(data, shown)
        self._save(parent_path)
        self._save(path)
        self.nodes[path] = _Znode(bytes(data), self.zxid, self.now_ms,
                                  self.session_id if ephemeral else 0, self.zxid, self.now_ms,
                                  self.zxid)
        parent.children.add(name)
        parent.creations += 1
        parent.cversion += 1
        parent.pzxid = self.zxid
        self.events += [("created", path), ("child", parent_path)]
        return path

    def set_data(self, path: str, data: bytes, version: int, shown: str) -> ZnodeStat:
        node = self._node(path, shown)
        if version != -1 and version != node.version:
            raise _error(BadVersionError, shown)
        self._check_size(data, shown)
        self._save(path)
        node.data = bytes(data)
        node.version += 1
        node.mzxid = self.zxid
        node.mtime = self.now_ms
        self.events.append(("changed", path))
        return node.stat()

    def check(self, path: str, version: int, shown: str) -> bool:
        node = self._node(path, shown)
        if version != -1 and version != node.version:
            raise _error(BadVersionError, shown)
        return True

    def delete(self, path: str, version: int, shown: str) -> bool:
        if path == "/":
            raise _error(BadArgumentsError, shown)
        node = self._node(path, shown)
        if version != -1 and version != node.version:
            raise _error(BadVersionError, shown)
        if node.children:
            raise _error(NotEmptyError, shown)
        parent_path, name = split(path)
        parent = self.nodes[parent_path]
        self._save(path)
        self._save(parent_path)
        del self.nodes[path]
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = self.zxid
        self.events += [("deleted", path), ("child", parent_path)]
        return True


class _Recipe(abc.ABC):
    """A watch as kazoo's recipes keep one: re-read after each one-shot server watch fires."""

    def __init__(self, client: MemoryZooKeeperClient, path: str, handle: Watch) -> None:
        self.client = client
        self.server = client._server
        self.abs_path = client._abs(path)
        self.handle = handle
        self.stopped = False

    def alive(self) -> bool:
        if self.handle.cancelled or self.client._closed:
            self.stopped = True
        return not self.stopped

    @abc.abstractmethod
    def read(self, reconnected: bool = False) -> bool:
        """Read the node (setting the next one-shot watch) and queue a delivery if due;
        False when a children watch found its node gone and ended."""

    def on_event(self) -> None:
        if self.alive() and self.client._connected:
            self.read()

    def on_reconnect(self) -> None:
        if self.alive():
            self.read(reconnected=True)


class _ChildrenRecipe(_Recipe):
    """kazoo's ChildrenWatch: deliver on every event, after a reconnect only if different."""

    prior: list[str] | None = None

    def read(self, reconnected: bool = False) -> bool:
        node = self.server._nodes.get(self.abs_path)
        if node is None:  # the watched node is gone: the watch ends without a delivery
            self.stopped = True
            return False
        self.server._watch(self.server._child_watches, self.abs_path, self)
        children = sorted(node.children)
        if reconnected and self.prior == children:
            return True
        self.prior = children
        self.server._post(self.handle._deliver, list(children))
        return True


class _DataRecipe(_Recipe):
    """kazoo's DataWatch: deliver when ``mzxid`` changed (None while absent), first read always."""

    version: int | None = None
    ever_called = False

    def read(self, reconnected: bool = False) -> bool:
        self.server._watch(self.server._data_watches, self.abs_path, self)
        node = self.server._nodes.get(self.abs_path)
        data, stat = (None, None) if node is None else (node.data, node.stat())
        version = None if node is None else node.mzxid
        if version != self.version or not self.ever_called:
            self.ever_called = True
            self.server._post(self.handle._deliver, data, stat)
        self.version = version
        return True


@dataclass(eq=False)
class _Session:
    id: int
    timeout_ms: int
    alive: bool = True
    expiry: Any = None              # IDelayedCall while disconnected


@dataclass(eq=False)
class _Fault:
    path: str
    error: ErrorSpec
    remaining: int
    applied: bool
    client: MemoryZooKeeperClient | None


class MemoryZooKeeperServer:
    """The shared tree, zxids, sessions and watches; the test's handle for injecting faults."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self._zxid = 0
        self._nodes: dict[str, _Znode] = {
            "/": _Znode(b"", 0, 0),
            "/zookeeper": _Znode(b"", 0, 0),
            "/zookeeper/config": _Znode(b"", 0, 0),
            "/zookeeper/quota": _Znode(b"", 0, 0)}
        self._nodes["/"].children = {"zookeeper"}
        self._nodes["/zookeeper"].children = {"config", "quota"}
        self._sessions: dict[int, _Session] = {}
        self._next_session = _FIRST_SESSION_ID
        self._data_watches: dict[str, set[tuple[_Recipe, int]]] = {}
        self._child_watches: dict[str, set[tuple[_Recipe, int]]] = {}
        self._faults: list[_Fault] = []
        self._queue: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._pump_scheduled = False

    # ---- clients and inspection ------------------------------------------------------------

    def client(self, connect: str = "memory", session_timeout_ms: int = 18000,
               connect_timeout_ms: int | None = None) -> MemoryZooKeeperClient:
        """A new (not yet started) session; ``connect`` may carry a chroot, as zookeeper.connect."""
        return MemoryZooKeeperClient(self, connect, session_timeout_ms, connect_timeout_ms)

    @property
    def last_zxid(self) -> int:
        return self._zxid

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def dump(self, root: str = "/") -> dict[str, bytes]:
        """{path: data} of ``root`` and everything under it (for assertions)."""
        prefix = root.rstrip("/") + "/"
        return {p: n.data for p, n in sorted(self._nodes.items())
                if p == root or p.startswith(prefix)}

    def stat(self, path: str) -> ZnodeStat | None:
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def live_sessions(self) -> list[int]:
        return sorted(s.id for s in self._sessions.values() if s.alive)

    # ---- fault injection -------------------------------------------------------------------

    def expire_session(self, client: MemoryZooKeeperClient) -> None:
        """The server expires ``client``'s session: its ephemerals go now (other sessions'
        watches fire). A connected client sees SUSPENDED, LOST and NEW_SESSION (re-reading its
        watches); a disconnected one sees LOST and NEW_SESSION when it reconnects."""
        session = client._session
        if session is None or not session.alive:
            return
        connected = client._connected
        if connected:  # the server closes the connection: no watch event reaches the client
            client._drop_link()
        self._expire(session)
        if connected:
            self._post(client._on_state, SessionState.SUSPENDED, session.id)
            self._post(self._resume, client)

    def disconnect(self, client: MemoryZooKeeperClient, expire_after_timeout: bool = True) -> None:
        """Cut ``client``'s connection: SUSPENDED; its requests wait (and are re-sent) until
        :meth:`reconnect`. The session expires after its timeout unless reconnected before."""
        session = client._session
        if session is None or not client._connected:
            return
        client._drop_link()
        self._post(client._on_state, SessionState.SUSPENDED, session.id)
        if expire_after_timeout and session.alive:
            session.expiry = self.reactor.callLater(session.timeout_ms / 1000.0,
                                                    self._expire, session)

    def reconnect(self, client: MemoryZooKeeperClient) -> None:
        """Restore ``client``'s connection: CONNECTED in the same session if it is still alive,
        else LOST then NEW_SESSION. Watches re-read; waiting requests are re-sent."""
        if client._connected or client._closed or client._session is None:
            return
        self._post(self._resume, client)

    def fail_next(self, path: str, error: ErrorSpec, count: int = 1, applied: bool = False,
                  client: MemoryZooKeeperClient | None = None) -> None:
        """The next ``count`` requests naming ``path`` (any op of a multi) fail with ``error``
        (a ZkError class or instance). ``applied``: the request takes effect and only its
        answer is lost. A ConnectionLossError also drops the connection, reconnecting in the
        next turn. With ``client``, only its requests match and ``path`` is in its chroot."""
        abs_path = normalize(path, client.chroot if client is not None else None)
        self._faults.append(_Fault(abs_path, error, count, applied, client))

    # ---- internals: the queue --------------------------------------------------------------

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in a later reactor turn, after everything posted before it."""
        self._queue.append((fn, args))
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.reactor.callLater(0, self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        for _ in range(len(self._queue)):  # what was posted meanwhile waits for the next turn
            fn, args = self._queue.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one bad item must not stall the others
                log.exception("in-memory ZooKeeper: %r failed", fn)

    # ---- internals: sessions ---------------------------------------------------------------

    def _next_zxid(self) -> int:
        self._zxid += 1
        return self._zxid

    def _open_session(self, timeout_ms: int) -> _Session:
        self._next_zxid()  # createSession is a transaction
        session = _Session(self._next_session, timeout_ms)
        self._next_session += 1
        self._sessions[session.id] = session
        return session

    def _expire(self, session: _Session) -> None:
        """closeSession: the session's ephemerals go in one transaction."""
        if not session.alive:
            return
        session.alive = False
        if session.expiry is not None and session.expiry.active():
            session.expiry.cancel()
        session.expiry = None
        del self._sessions[session.id]
        txn = _Txn(self, self._next_zxid(), session.id)
        owned = sorted((p for p, n in self._nodes.items() if n.ephemeral_owner == session.id),
                       key=len, reverse=True)
        for path in owned:
            txn.delete(path, -1, path)
        self._commit(txn)

    def _resume(self, client: MemoryZooKeeperClient) -> None:
        """The client's connection is back: same session if alive, else LOST + a new one."""
        if client._closed or client._connected or client._session is None:
            return
        session = client._session
        if session.alive:
            if session.expiry is not None and session.expiry.active():
                session.expiry.cancel()
            session.expiry = None
            client._attach(session)
            return
        client._on_state(SessionState.LOST, session.id)
        client._attach(self._open_session(client.session_timeout_ms))

    # ---- internals: requests ---------------------------------------------------------------

    def _submit(self, client: MemoryZooKeeperClient, paths: Sequence[str],
                run: Callable[[_Session], Any], shown: str | None,
                fire_later: bool = False) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self._post(self._execute, client, paths, run, shown, fire_later, d)
        return d

    def _execute(self, client: MemoryZooKeeperClient, paths: Sequence[str],
                 run: Callable[[_Session], Any], shown: str | None, fire_later: bool,
                 d: defer.Deferred[Any]) -> None:
        outcome: Any
        if client._closed:
            outcome = failure.Failure(_error(ClientClosedError, shown))
        elif not client._connected or client._session is None:
            outcome = failure.Failure(_error(ConnectionLossError, shown))
        else:
            fault = self._take_fault(client, paths)
            if fault is None or fault.applied:
                try:
                    outcome = run(client._session)
                except ZkError as exc:
                    outcome = failure.Failure(exc)
            if fault is not None:
                outcome = failure.Failure(
                    _error(fault.error, shown) if isinstance(fault.error, type) else fault.error)
                if isinstance(outcome.value, ConnectionLossError):
                    self.disconnect(client, expire_after_timeout=False)
                    self._post(self._resume, client)
        fire = d.errback if isinstance(outcome, failure.Failure) else d.callback
        if fire_later:  # watch installs: the initial delivery, already queued, comes first
            self._post(fire, outcome)
        else:
            fire(outcome)

    def _take_fault(self, client: MemoryZooKeeperClient, paths: Sequence[str]) -> _Fault | None:
        for fault in self._faults:
            if (fault.client is None or fault.client is client) and fault.path in paths:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _ensure_root(self, path: str) -> None:
        """Create ``path`` and its missing ancestors (persistent, empty), one transaction each."""
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if prefix not in self._nodes:
                txn = _Txn(self, self._next_zxid(), 0)
                try:
                    txn.create(prefix, b"", False, False, prefix)
                except ZkError:
                    txn.rollback()
                    raise
                self._commit(txn)

    def _write(self, session: _Session, body: Callable[[_Txn], T]) -> T:
        """Run ``body`` as one transaction (one zxid, consumed even if it fails)."""
        txn = _Txn(self, self._next_zxid(), session.id)
        try:
            result = body(txn)
        except ZkError:
            txn.rollback()
            raise
        self._commit(txn)
        return result

    def _commit(self, txn: _Txn) -> None:
        for kind, path in txn.events:
            if kind in ("created", "changed", "deleted"):
                self._trigger(self._data_watches, path)
            if kind in ("deleted", "child"):
                self._trigger(self._child_watches, path)

    # ---- internals: watches ----------------------------------------------------------------

    def _watch(self, table: dict[str, set[tuple[_Recipe, int]]], path: str, recipe: _Recipe) -> None:
        """A one-shot server watch, valid only on the recipe's current connection."""
        table.setdefault(path, set()).add((recipe, recipe.client._link))

    def _trigger(self, table: dict[str, set[tuple[_Recipe, int]]], path: str) -> None:
        for recipe, link in table.pop(path, ()):
            if recipe.client._link == link and recipe.client._connected:
                self._post(recipe.on_event)


class MemoryZooKeeperClient(DeferredSession):
    """One session on a :class:`MemoryZooKeeperServer`, with ``ZooKeeperClient``'s API."""

    def __init__(self, server: MemoryZooKeeperServer, connect: str = "memory",
                 session_timeout_ms: int = 18000, connect_timeout_ms: int | None = None) -> None:
        super().__init__(server.reactor, session_timeout_ms, parse_connect_string(connect).chroot)
        self.connect_timeout_ms = connect_timeout_ms or session_timeout_ms
        self._server = server
        self._session: _Session | None = None
        self._connected = False
        self._closed = True          # until start()
        self._link = 0               # bumped whenever the connection drops: stale watches die
        self._recipes: list[_Recipe] = []

    @property
    def server(self) -> MemoryZooKeeperServer:
        return self._server

    def _abs(self, path: str, trailing: bool = False) -> str:
        return normalize(path, self.chroot, trailing)

    def _rel(self, abs_path: str) -> str:
        if not self.chroot:
            return abs_path
        return abs_path[len(self.chroot):] or "/"

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> defer.Deferred[Any]:
        """Open a session (creating the chroot first if missing, as the real client does)."""
        self._stopping = False
        self._closed = False
        d: defer.Deferred[Any] = defer.Deferred()

        def connect() -> None:
            if self.chroot:
                self._server._ensure_root(self.chroot)
            self._attach(self._server._open_session(self.session_timeout_ms))
            d.callback(None)
        self._server._post(connect)
        return d

    def stop(self, limit: float = 2.0) -> defer.Deferred[Any]:
        """Close the session: its ephemerals go at once (if connected; otherwise the session
        expires by its timeout, as a real one does). Fires True."""
        self._stopping = True
        self._fail_waiters()
        session = self._session
        if session is not None and session.alive and self._connected:
            self._server._expire(session)
        self._closed = True
        self._drop_link()
        self._recipes = []
        self._on_state(SessionState.LOST, None)
        d: defer.Deferred[Any] = defer.Deferred()
        self._server._post(d.callback, True)
        return d

    def _drop_link(self) -> None:
        self._connected = False
        self._link += 1

    def _attach(self, session: _Session) -> None:
        """Connected (again) in ``session``: watches re-read first, then the state is told."""
        self._session = session
        self._connected = True
        self._link += 1
        self._recipes = [r for r in self._recipes if r.alive()]
        for recipe in self._recipes:
            recipe.on_reconnect()
        self._on_state(SessionState.CONNECTED, session.id)

    # ---- primitives ------------------------------------------------------------------------

    def _send(self, paths: Iterable[str], run: Callable[[_Session], Any], shown: str | None,
              fire_later: bool = False) -> defer.Deferred[Any]:
        return self._server._submit(self, list(paths), run, shown, fire_later)

    def _create(self, path: str, data: bytes, ephemeral: bool, sequence: bool,
                makepath: bool) -> defer.Deferred[Any]:
        _check_args(data=data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
        target = self._abs(path, trailing=sequence)
        server = self._server

        def run(session: _Session) -> str:
            def attempt(txn: _Txn) -> str:
                return txn.create(target, data, ephemeral, sequence, path)
            try:
                return self._rel(server._write(session, attempt))
            except NoNodeError:
                if not makepath:
                    raise
            # as kazoo's makepath: the failed attempt, then each missing parent, then the node
            parent = split(target)[0]
            server._ensure_root(parent)
            return self._rel(server._write(session, attempt))
        return self._send([target.rstrip("/") or "/"], run, path)

    def _get(self, path: str) -> defer.Deferred[Any]:
        target = self._abs(path)

        def run(session: _Session) -> tuple[bytes, ZnodeStat]:
            node = self._server._nodes.get(target)
            if node is None:
                raise _error(NoNodeError, path)
            return node.data, node.stat()
        return self._send([target], run, path)

    def _exists(self, path: str) -> defer.Deferred[Any]:
        target = self._abs(path)
        return self._send([target], lambda session: self._server.stat(target), path)

    def _get_children(self, path: str, include_data: bool) -> defer.Deferred[Any]:
        _check_args(include_data=include_data)
        target = self._abs(path)

        def run(session: _Session) -> Any:
            node = self._server._nodes.get(target)
            if node is None:
                raise _error(NoNodeError, path)
            children = sorted(node.children)
            return (children, node.stat()) if include_data else children
        return self._send([target], run, path)

    def _set(self, path: str, data: bytes, version: int) -> defer.Deferred[Any]:
        _check_args(data=data, version=version)
        target = self._abs(path)
        return self._send([target], lambda session: self._server._write(
            session, lambda txn: txn.set_data(target, data, version, path)), path)

    def _delete(self, path: str, version: int) -> defer.Deferred[Any]:
        _check_args(version=version)
        target = self._abs(path)
        return self._send([target], lambda session: self._server._write(
            session, lambda txn: txn.delete(target, version, path)), path)

    def _multi(self, ops: Sequence[Op]) -> defer.Deferred[Any]:
        """All ops in one transaction (one zxid); a failure undoes them and is reported per op."""
        targets: list[str] = []
        for op in ops:
            if isinstance(op, CreateOp):
                _check_args(data=op.data, ephemeral=op.ephemeral, sequence=op.sequence)
                targets.append(self._abs(op.path, trailing=op.sequence))
            elif isinstance(op, SetDataOp):
                _check_args(data=op.data, version=op.version)
                targets.append(self._abs(op.path))
            elif isinstance(op, (CheckOp, DeleteOp)):
                _check_args(version=op.version)
                targets.append(self._abs(op.path))
            else:
                raise TypeError(f"not a multi-op operation: {op!r}")

        def apply(txn: _Txn, op: Op, target: str) -> Any:
            if isinstance(op, CreateOp):
                return self._rel(txn.create(target, op.data, op.ephemeral, op.sequence, op.path))
            if isinstance(op, SetDataOp):
                return txn.set_data(target, op.data, op.version, op.path)
            if isinstance(op, CheckOp):
                return txn.check(target, op.version, op.path)
            return txn.delete(target, op.version, op.path)

        def run(session: _Session) -> list[Any]:
            txn = _Txn(self._server, self._server._next_zxid(), session.id)
            results: list[Any] = []
            for i, (op, target) in enumerate(zip(ops, targets)):
                try:
                    results.append(apply(txn, op, target))
                except ZkError as exc:
                    txn.rollback()
                    return ([_error(RolledBackError, o.path) for o in ops[:i]] + [exc]
                            + [_error(RuntimeInconsistencyError, o.path) for o in ops[i + 1:]])
            self._server._commit(txn)
            return results
        return self._send([t.rstrip("/") or "/" for t in targets], run, None)

    # ---- watches ---------------------------------------------------------------------------

    def watch_children(self, path: str,
                       callback: Callable[[list[str]], None]) -> defer.Deferred[Watch]:
        """``callback(sorted children)`` now and after every change; NoNodeError if missing."""
        handle = Watch(path, callback)

        def install(session: _Session) -> Watch:
            recipe = _ChildrenRecipe(self, path, handle)
            if not recipe.read():
                raise NoNodeError("cannot watch children of a missing node", path)
            self._recipes.append(recipe)
            return handle
        return self._request(path, lambda: self._send([self._abs(path)], install, path,
                                                      fire_later=True))

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, Any], None]) -> defer.Deferred[Watch]:
        """``callback(data, stat)`` now and after every change ((None, None) while absent)."""
        handle = Watch(path, callback)

        def install(session: _Session) -> Watch:
            recipe = _DataRecipe(self, path, handle)
            recipe.read()
            self._recipes.append(recipe)
            return handle
        return self._request(path, lambda: self._send([self._abs(path)], install, path,
                                                      fire_later=True))


def _check_args(**kwargs: Any) -> None:
    """kazoo's argument checks, with its messages (raised before anything is sent)."""
    for name, value in kwargs.items():
        if name == "data" and not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        if name == "version" and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError("Invalid type for 'version' (int expected)")
        if name in ("ephemeral", "sequence", "makepath", "include_data") and not isinstance(value, bool):
            raise TypeError(f"Invalid type for '{name}' (bool expected)")


if TYPE_CHECKING:
    def _conforms(client: MemoryZooKeeperClient) -> ZooKeeper:
        return client  # mypy: the fake satisfies the broker's ZooKeeper protocol


__all__ = ["MemoryZooKeeperServer", "MemoryZooKeeperClient", "ZnodeStat", "normalize",
           "JUTE_MAX_BUFFER"]
