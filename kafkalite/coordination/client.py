"""``ZooKeeperClient``: one kazoo session driven from a Twisted reactor.

Threading contract (see local-infrastructure.md §2): every public method must be called in
the reactor thread and returns a Deferred that fires in the reactor thread. Requests use
kazoo's ``*_async`` calls (non-blocking); the few blocking kazoo calls (``start``, watch
construction) run in the reactor's thread pool; ``stop`` runs in a daemon thread with a time
limit. Watch callbacks and state changes are re-entered into the reactor with
``callFromThread`` and never call kazoo from kazoo's own threads.

The Deferred layer above the requests (state listeners, re-sending after a connection loss,
multi-op failures, ``ensure_path`` & co.) is :class:`~.session.DeferredSession`, shared with
the in-memory ZooKeeper of the in-process tests.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.recipe.watchers import ChildrenWatch
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE
from twisted.internet import defer

from kafkalite.coordination import reactor_bridge
from kafkalite.coordination.connect_string import parse_connect_string
from kafkalite.coordination.data_watch import PipelinedDataWatch
from kafkalite.coordination.errors import NoNodeError
from kafkalite.coordination.interfaces import SessionState, Watch
from kafkalite.coordination.kazoo_errors import translate
from kafkalite.coordination.kazoo_handler import PollingHandler
from kafkalite.coordination.ops import CheckOp, CreateOp, DeleteOp, Op, SetDataOp
from kafkalite.coordination.session import DeferredSession

log = logging.getLogger(__name__)
logging.getLogger("kazoo").setLevel(logging.WARNING)

#: Reconnect quickly after an outage (kazoo's default back-off grows to an hour).
CONNECTION_RETRY = dict(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)

_CONNECTION = {KazooState.CONNECTED: SessionState.CONNECTED,
               KazooState.SUSPENDED: SessionState.SUSPENDED,
               KazooState.LOST: SessionState.LOST}


#: Kafka's sensitive roots (ZkData.sensitiveRootPaths): with secure ACLs only their creator may
#: even read them (SCRAM credentials, dynamic broker configs with passwords, delegation tokens).
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")


def secure_acls(path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls for ``zookeeper.set.acl=true``: the authenticated creator may
    do everything, everybody may read, except under the sensitive roots (creator only)."""
    if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
        return list(CREATOR_ALL_ACL)
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


class ZooKeeperClient(DeferredSession):
    """A kazoo session with a Deferred API for the reactor thread.

    ``digest_auth`` (username, password) authenticates the session (ZooKeeper's digest scheme;
    Kafka logs in with SASL DIGEST-MD5 from the same JAAS Client section); ``secure`` creates every
    znode with :func:`secure_acls` (``zookeeper.set.acl``), which needs an authenticated session."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connect_timeout_ms: int | None = None, reactor: Any = None, *,
                 secure: bool = False, digest_auth: tuple[str, str] | None = None) -> None:
        cs = parse_connect_string(connect)
        super().__init__(reactor or reactor_bridge.default_reactor(), session_timeout_ms,
                         cs.chroot)
        if secure and digest_auth is None:
            raise ValueError("secure ZooKeeper ACLs need an authenticated session (digest_auth)")
        self.hosts = cs.hosts
        self.connect_timeout_ms = connect_timeout_ms or session_timeout_ms
        self.secure = secure
        self._auth = [("digest", f"{digest_auth[0]}:{digest_auth[1]}")] if digest_auth else None
        self._zk = KazooClient(hosts=str(cs), timeout=session_timeout_ms / 1000.0,
                               connection_retry=dict(CONNECTION_RETRY), auth_data=self._auth,
                               handler=PollingHandler())
        self._zk.add_listener(self._kazoo_state_listener)

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def kazoo_client_id(self) -> tuple[int, bytes] | None:
        """(session id, password): only for tests that force an expiry with a twin client."""
        client_id: tuple[int, bytes] | None = self._zk.client_id
        return client_id

    def start(self) -> defer.Deferred[Any]:
        """Connect (creating the chroot first if missing, as Kafka does). Fires None."""
        self._stopping = False

        def blocking_start() -> int:
            if self.chroot:
                self._create_chroot()
            self._zk.start(timeout=self.connect_timeout_ms / 1000.0)
            return int(self._zk.client_id[0])

        def started(session_id: int) -> None:
            if self._session_id is None:
                self._session_id = session_id
            log.info("ZooKeeper session 0x%x established with %s%s", session_id, self.hosts,
                     self.chroot or "")
        return reactor_bridge.in_thread(self._reactor, blocking_start).addCallback(started)

    def _create_chroot(self) -> None:  # pool thread
        bootstrap = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0,
                                connection_retry=dict(CONNECTION_RETRY), auth_data=self._auth)
        try:
            bootstrap.start(timeout=self.connect_timeout_ms / 1000.0)
            bootstrap.ensure_path(self.chroot or "/", acl=secure_acls("/") if self.secure else None)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def stop(self, limit: float = 2.0) -> defer.Deferred[Any]:
        """Close the session (ephemerals vanish at once); fires False if it took > ``limit`` s."""
        self._stopping = True
        self._fail_waiters()
        return reactor_bridge.stop_zk(self._zk, limit, self._reactor)

    def _kazoo_state_listener(self, state: str) -> None:
        # kazoo's connection thread: no kazoo calls here (they would deadlock the client)
        client_id = self._zk.client_id
        session = client_id[0] if client_id else None
        self._reactor.callFromThread(self._on_state, _CONNECTION[state], session)

    def _translate(self, exc: BaseException, path: str | None) -> BaseException:
        return translate(exc, path)

    # ---- primitives ------------------------------------------------------------------------

    def _async(self, result: Any, path: str | None) -> defer.Deferred[Any]:
        return reactor_bridge.as_deferred(result, self._reactor, path)

    def _create(self, path: str, data: bytes, ephemeral: bool, sequence: bool,
                makepath: bool) -> defer.Deferred[Any]:
        acl = secure_acls(path) if self.secure else None
        return self._async(self._zk.create_async(path, data, acl=acl, ephemeral=ephemeral,
                                                 sequence=sequence, makepath=makepath), path)

    def _get(self, path: str) -> defer.Deferred[Any]:
        return self._async(self._zk.get_async(path), path)

    def _exists(self, path: str) -> defer.Deferred[Any]:
        return self._async(self._zk.exists_async(path), path)

    def _get_children(self, path: str, include_data: bool) -> defer.Deferred[Any]:
        return self._async(self._zk.get_children_async(path, include_data=include_data), path)

    def _set(self, path: str, data: bytes, version: int) -> defer.Deferred[Any]:
        return self._async(self._zk.set_async(path, data, version), path)

    def _delete(self, path: str, version: int) -> defer.Deferred[Any]:
        return self._async(self._zk.delete_async(path, version), path)

    def _multi(self, ops: Sequence[Op]) -> defer.Deferred[Any]:
        """kazoo's commit reports a failed op only inside its result list (never raises): the
        entries are translated here so both clients report the same types."""
        tx = self._zk.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, op.data, acl=secure_acls(op.path) if self.secure else None,
                          ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetDataOp):
                tx.set_data(op.path, op.data, op.version)
            elif isinstance(op, CheckOp):
                tx.check(op.path, op.version)
            elif isinstance(op, DeleteOp):
                tx.delete(op.path, op.version)
            else:
                raise TypeError(f"not a multi-op operation: {op!r}")

        def translated(results: list[Any]) -> list[Any]:
            return [translate(r, op.path) if isinstance(r, BaseException) else r
                    for r, op in zip(results, ops)]
        return self._async(tx.commit_async(), None).addCallback(translated)

    # ---- watches ---------------------------------------------------------------------------

    def watch_children(self, path: str,
                       callback: Callable[[list[str]], None]) -> defer.Deferred[Watch]:
        """Call ``callback(children)`` now and on every change, in the reactor thread.

        The path must exist (NoNodeError otherwise). The watch survives reconnects and
        re-reads after a new session; it ends silently when the node is deleted. Fires the
        :class:`Watch` handle after the initial delivery has been queued.
        """
        handle = Watch(path, callback)

        def install() -> Watch:  # pool thread: the constructor reads synchronously
            fired: list[bool] = []

            def fire(children: list[str]) -> bool | None:
                if handle.cancelled:
                    return False
                fired.append(True)
                self._reactor.callFromThread(handle._deliver, sorted(children))
                return None
            ChildrenWatch(self._zk, path, fire)
            if not fired:
                raise NoNodeError("cannot watch children of a missing node", path)
            return handle
        return reactor_bridge.in_thread(self._reactor, install)

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, Any], None]) -> defer.Deferred[Watch]:
        """Call ``callback(data, stat)`` now and on every change ((None, None) while absent)."""
        handle = Watch(path, callback)

        def install() -> Watch:  # pool thread: the first read is synchronous
            def fire(data: bytes | None, stat: Any) -> bool | None:
                if handle.cancelled:
                    return False
                self._reactor.callFromThread(handle._deliver, data, stat)
                return None
            PipelinedDataWatch(self._zk, path, fire)
            return handle
        return reactor_bridge.in_thread(self._reactor, install)


__all__ = ["ZooKeeperClient", "SessionState", "Watch", "CONNECTION_RETRY"]
