"""KafkaClient: the blocking core every producer, consumer, admin call and tool is built on.

It bootstraps from any listed broker, keeps one connection per broker (negotiating versions
with ApiVersions on connect), routes each request by the latest metadata (partition leaders,
the controller, group coordinators) and retries retriable failures with exponential backoff
until ``retries`` attempts or ``request_timeout_ms`` are used up (Java's ``retry.backoff.ms``
and ``delivery.timeout.ms`` ideas in one bound). A failure that says the cluster is changing (a
broker unreachable, a leader or coordinator moved) does not count against ``retries``: it marks
the metadata stale and is retried by the new leaders until the deadline, as Java's clients fail
over (:meth:`KafkaClient.note_retriable`). Every socket operation has a deadline.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, TypeVar

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import FetchRequest, MetadataRequest

from .cluster import ClusterMetadata, TopicPartition, from_response
from .connection import BrokerConnection, parse_bootstrap
from .security import ClientSecurity
from .errors import ClientError, ConnectionFailed, UnknownPartition, check

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Errors after which the cached metadata is stale (leader moved, topic appeared, ...).
#: Authentication failures: fatal, as in Kafka's clients (retrying a wrong password only delays
#: the error and counts against the broker's failed-authentication limit).
_AUTH_FAILURES = frozenset({ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                            ErrorCode.ILLEGAL_SASL_STATE})
_STALE_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_CONTROLLER,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REPLICA_NOT_AVAILABLE,
})
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
#: Failures that mean the cluster is changing under the client (a broker died, a leadership or a
#: coordinator is moving): the controller settles them within the ZooKeeper session timeout, so
#: they are retried against fresh metadata until the call's deadline and do not use up
#: ``retries`` (as Java's clients mark the node down, refresh metadata and carry on).
_CLUSTER_CHANGING = _STALE_METADATA | _COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class FetchedPartition(NamedTuple):
    """One partition of a Fetch answer; ``records`` is the raw batch bytes (maybe a partial last batch).
    ``aborted_transactions``: (producer id, first offset) of the aborted transactions in range, for
    a read_committed fetch (records.control.AbortedTransactionFilter skips their batches)."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview
    aborted_transactions: tuple[tuple[int, int], ...] = ()


class KafkaClient:
    """Blocking client for one cluster; see CLIENT_CONTRACT.md for the contract.

    Thread safety: calls may come from several threads; each connection serialises its
    request/response pairs under its own lock.
    """

    def __init__(self, bootstrap_servers: str | list[str] | None, *, client_id: str = "kafkalite",
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100,
                 retries: int = 5, connect_timeout_ms: int = 10000, security: ClientSecurity | None = None) -> None:
        # None (a Producer/Consumer/Admin given neither servers nor a client) is ClientError, not a TypeError
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.retries = retries
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.security = security          # TLS and SASL (a --command-config's properties)
        self._lock = threading.RLock()
        self._conns: dict[int, BrokerConnection] = {}
        self._cluster = ClusterMetadata({}, -1, None, {})
        self._coordinators: dict[str, int] = {}
        self._txn_coordinators: dict[str, int] = {}     # transactional id -> coordinator (key type 1)
        self._closed = False
        self._stale = False
        # Bootstrap: the first Metadata answer tells the real broker ids and addresses.
        self._with_retries(lambda: self._refresh_metadata([]), "bootstrap")

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()

    def __enter__(self) -> "KafkaClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def cluster(self) -> ClusterMetadata:
        """The latest metadata snapshot (may be stale; :meth:`metadata` refreshes)."""
        return self._cluster

    # -- connections ----------------------------------------------------------------------------
    def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to broker ``node_id``, connecting (and negotiating) if needed."""
        with self._lock:
            if self._closed:
                raise ClientError("client is closed")
            conn = self._conns.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            addr = self._cluster.brokers.get(node_id)
            if addr is None:
                raise ClientError(f"broker {node_id} is not in the cluster metadata",
                                  ErrorCode.BROKER_NOT_AVAILABLE, retriable=True)
            conn = BrokerConnection(addr[0], addr[1], node_id=node_id, client_id=self.client_id,
                                    connect_timeout=self.connect_timeout, request_timeout=self.request_timeout,
                                    security=self.security)
            self._conns[node_id] = conn
            return conn

    def _any_connection(self) -> BrokerConnection:
        """A connection to some live broker: an open one, then known brokers, then bootstrap."""
        with self._lock:
            for conn in self._conns.values():
                if not conn.closed:
                    return conn
            errors: list[str] = []
            for node_id in list(self._cluster.brokers):
                try:
                    return self.connection(node_id)
                except ClientError as exc:
                    if exc.code in _AUTH_FAILURES:
                        raise
                    errors.append(str(exc))
            for i, (host, port) in enumerate(self.bootstrap):
                try:
                    conn = BrokerConnection(host, port, node_id=-1 - i, client_id=self.client_id,
                                            connect_timeout=self.connect_timeout,
                                            request_timeout=self.request_timeout, security=self.security)
                except ClientError as exc:
                    if exc.code in _AUTH_FAILURES:
                        raise
                    errors.append(str(exc))
                    continue
                self._conns[conn.node_id] = conn
                return conn
            servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
            raise ConnectionFailed(f"no broker reachable (bootstrap {servers}): {errors[-1] if errors else ''}")

    def send(self, node_id: int | None, api_key: ApiKey, body: Mapping[str, Any], *, version: int | None = None,
             timeout: float | None = None) -> dict:
        """One request to ``node_id`` (None = any broker); returns the response body.

        No retry here: callers decide, because what is retriable depends on the API.
        """
        conn = self._any_connection() if node_id is None else self.connection(node_id)
        return conn.request(api_key, body, version=version, timeout=timeout)

    # -- retries --------------------------------------------------------------------------------
    def _with_retries(self, attempt: Callable[[], T], what: str, *, deadline: float | None = None) -> T:
        """Run ``attempt`` until it succeeds, a non-retriable error, or retries/time run out.

        A failure that says the cluster is changing (see :meth:`note_retriable`) is retried until
        ``deadline`` (default ``request_timeout_ms``) however many attempts that takes: a kill -9'd
        leader keeps refusing connections until the controller elects a new one, and a fixed
        count of quick retries would give up before that. Other retriable errors count against
        ``retries`` too.
        """
        if deadline is None:
            deadline = time.monotonic() + self.request_timeout
        backoff = self.retry_backoff
        tries = counted = 0
        while True:
            try:
                return attempt()
            except ClientError as exc:
                tries += 1
                if not exc.retriable:
                    raise
                if not self.note_retriable(exc):
                    counted += 1
                now = time.monotonic()
                if counted > self.retries or now + backoff >= deadline:
                    raise ClientError(f"{what}: {exc} (gave up after {tries} attempts)", exc.code,
                                      retriable=True) from None
                log.debug("%s: %s; retrying in %.0f ms", what, exc, backoff * 1000)
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def note_retriable(self, exc: ClientError) -> bool:
        """Take note of a retriable failure; True when it means the cluster is changing (a broker
        unreachable, a leader or coordinator moved), after marking the metadata stale so the next
        attempt routes by fresh leaders. The one rule for every retry loop (this client's and the
        producer's per-batch retries), so fetch and produce fail over alike. A partition that fresh
        metadata does not name (:class:`UnknownPartition`) is not the cluster changing."""
        if isinstance(exc, ConnectionFailed) or exc.code in _STALE_METADATA:
            self._invalidate_metadata()
            return not isinstance(exc, UnknownPartition)
        return exc.code in _CLUSTER_CHANGING

    def _invalidate_metadata(self) -> None:
        self._stale = True

    # -- metadata -------------------------------------------------------------------------------
    def _refresh_metadata(self, topics: list[str] | None, allow_auto_create: bool = False) -> ClusterMetadata:
        body: MetadataRequest = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_create,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
        resp = self.send(None, ApiKey.METADATA, body)
        fresh = from_response(resp)
        with self._lock:
            old = self._cluster
            merged = dict(fresh.topics) if topics is None else {**old.topics, **fresh.topics}
            if topics is not None:   # drop topics the broker no longer knows
                for name, t in fresh.topics.items():
                    if t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        merged.pop(name, None)
            self._cluster = ClusterMetadata(fresh.brokers, fresh.controller_id, fresh.cluster_id, merged)
            # connections to brokers that left or moved are dropped
            for node_id, conn in list(self._conns.items()):
                addr = fresh.brokers.get(node_id)
                if node_id >= 0 and (addr is None or (addr[0], addr[1]) != (conn.host, conn.port)):
                    conn.close()
                    del self._conns[node_id]
            self._stale = False
        return fresh

    def metadata(self, topics: list[str] | None = None, *, allow_auto_create: bool = False) -> ClusterMetadata:
        """Fresh metadata for ``topics`` (None = all topics); per-topic errors are left in the result."""
        return self._with_retries(lambda: self._refresh_metadata(topics, allow_auto_create), "Metadata")

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic``; retries while it is still being created."""
        def attempt() -> list[int]:
            md = self._refresh_metadata([topic])
            t = md.topics.get(topic)
            if t is None or t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ClientError(f"topic {topic!r} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  retriable=False)
            if t.error:
                raise ClientError.from_code(t.error, f"topic {topic!r}")
            if not t.partitions:
                raise ClientError(f"topic {topic!r} has no partitions yet", ErrorCode.LEADER_NOT_AVAILABLE)
            return sorted(t.partitions)
        return self._with_retries(attempt, f"partitions of {topic!r}")

    def leader_for(self, tp: TopicPartition) -> int:
        """The leader of ``tp`` by cached metadata, refreshing when unknown or stale."""
        leader = -1 if self._stale else self._cluster.leader(tp)
        if leader < 0:
            md = self._refresh_metadata([tp.topic])
            t = md.topics.get(tp.topic)
            if t is None or t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                    t.partitions and tp.partition not in t.partitions):
                raise UnknownPartition(f"{tp.topic}-{tp.partition} does not exist")
            leader = md.leader(tp)
            if leader < 0:
                raise ClientError(f"{tp.topic}-{tp.partition} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
        return leader

    def _group_by_leader(self, tps: Any) -> dict[int, list[TopicPartition]]:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            by_node.setdefault(self.leader_for(tp), []).append(tp)
        return by_node

    # -- offsets --------------------------------------------------------------------------------
    def list_offsets(self, requests: dict[TopicPartition, int], isolation_level: int = 0
                     ) -> dict[TopicPartition, tuple[int, int]]:
        """Offsets by timestamp per partition: -2 earliest, -1 latest, else a time in ms."""
        result: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(requests)

        def attempt() -> dict[TopicPartition, tuple[int, int]]:
            by_node = self._group_by_leader(todo)
            pending = []
            for node, tps in by_node.items():
                topics: dict[str, list] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": todo[tp]})
                body = {"replica_id": -1, "isolation_level": isolation_level,
                        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
                conn = self.connection(node)
                with conn.lock:
                    pending.append((conn, conn.send(ApiKey.LIST_OFFSETS, conn.version_for(ApiKey.LIST_OFFSETS), body)))
            retry: ClientError | None = None
            for conn, corr in pending:
                with conn.lock:
                    resp = conn.receive(corr)
                for t in resp["topics"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition_index"])
                        err = p["error_code"]
                        if err:
                            exc = ClientError.from_code(err, f"ListOffsets {tp.topic}-{tp.partition}")
                            if not exc.retriable:
                                raise exc
                            retry = exc
                            continue
                        result[tp] = (p["offset"], p["timestamp"])
                        todo.pop(tp, None)
            if todo:
                raise retry or ClientError(f"ListOffsets: no answer for {sorted(todo)}", ErrorCode.UNKNOWN_SERVER_ERROR)
            return result

        return self._with_retries(attempt, "ListOffsets") if todo else result

    # -- fetch ----------------------------------------------------------------------------------
    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int = 1 << 20, max_wait_ms: int = 500,
              min_bytes: int = 1, isolation_level: int = 0) -> FetchedPartition:
        """Records of one partition from ``offset`` (OFFSET_OUT_OF_RANGE comes back in ``.error``)."""
        return self.fetch_many({tp: offset}, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                               min_bytes=min_bytes, isolation_level=isolation_level)[tp]

    def fetch_many(self, requests: dict[TopicPartition, int], *, max_bytes: int = 1 << 20, max_wait_ms: int = 500,
                   min_bytes: int = 1, isolation_level: int = 0) -> dict[TopicPartition, FetchedPartition]:
        """One Fetch per leader broker, all written before any answer is read."""
        result: dict[TopicPartition, FetchedPartition] = {}
        todo = dict(requests)
        timeout = self.request_timeout + max_wait_ms / 1000.0

        def attempt() -> dict[TopicPartition, FetchedPartition]:
            pending = []
            for node, tps in self._group_by_leader(todo).items():
                topics: dict[str, list] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        {"partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": todo[tp],
                         "log_start_offset": -1, "partition_max_bytes": max_bytes})
                body: FetchRequest = {
                    "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
                    "max_bytes": max(max_bytes, min(max_bytes * len(tps), 52428800)),
                    "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": n, "partitions": ps} for n, ps in topics.items()],
                    "forgotten_topics_data": [], "rack_id": ""}
                conn = self.connection(node)
                with conn.lock:
                    pending.append((conn, conn.send(ApiKey.FETCH, conn.version_for(ApiKey.FETCH), body)))
            retry: ClientError | None = None
            for conn, corr in pending:
                with conn.lock:
                    resp = conn.receive(corr, timeout)
                if resp.get("error_code"):
                    raise ClientError.from_code(resp["error_code"], f"Fetch from broker {conn.node_id}")
                for t in resp["responses"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["topic"], p["partition_index"])
                        err = p["error_code"]
                        if err and err != ErrorCode.OFFSET_OUT_OF_RANGE:
                            exc = ClientError.from_code(err, f"Fetch {tp.topic}-{tp.partition}")
                            if not exc.retriable:
                                raise exc
                            retry = exc
                            continue
                        records = p["records"]
                        aborted = tuple((a["producer_id"], a["first_offset"]) for a in p["aborted_transactions"] or ())
                        result[tp] = FetchedPartition(ErrorCode(err), p["high_watermark"], p["last_stable_offset"],
                                                      p["log_start_offset"], records if records is not None else b"",
                                                      aborted)
                        todo.pop(tp, None)
            if todo:
                raise retry or ClientError(f"Fetch: no answer for {sorted(todo)}", ErrorCode.UNKNOWN_SERVER_ERROR)
            return result

        return self._with_retries(attempt, "Fetch", deadline=time.monotonic() + timeout) if todo else result

    # -- group coordinator ----------------------------------------------------------------------
    def _coordinator_cache(self, key_type: int) -> dict[str, int]:
        return self._coordinators if key_type == 0 else self._txn_coordinators

    def find_coordinator(self, group_id: str, *, refresh: bool = False, key_type: int = 0) -> int:
        """Broker id of ``group_id``'s coordinator (cached until it moves); ``key_type`` 1: the
        transaction coordinator of transactional id ``group_id``."""
        cache = self._coordinator_cache(key_type)
        if not refresh and group_id in cache:
            return cache[group_id]
        what = "group" if key_type == 0 else "transactional id"

        def attempt() -> int:
            resp = self.send(None, ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": key_type})
            check(resp["error_code"], f"FindCoordinator for {what} {group_id!r}", resp.get("error_message"))
            node = resp["node_id"]
            with self._lock:
                if node not in self._cluster.brokers:
                    brokers = dict(self._cluster.brokers)
                    brokers[node] = (resp["host"], resp["port"], None)
                    c = self._cluster
                    self._cluster = ClusterMetadata(brokers, c.controller_id, c.cluster_id, c.topics)
                cache[group_id] = node
            return node
        return self._with_retries(attempt, f"FindCoordinator {group_id!r}")

    def send_to_coordinator(self, group_id: str, api_key: ApiKey, body: Mapping[str, Any], error_of: Callable[[dict], int],
                            what: str, *, key_type: int = 0, retriable: frozenset[int] = frozenset()) -> dict:
        """Send to the group's coordinator, re-finding it on NOT_COORDINATOR / COORDINATOR_*.

        ``error_of`` extracts the error code that decides about retrying; any other error is left
        in the returned body for the caller. ``key_type`` 1 sends to a transaction coordinator;
        codes in ``retriable`` (e.g. CONCURRENT_TRANSACTIONS) are retried too.
        """
        cache = self._coordinator_cache(key_type)

        def attempt() -> dict:
            node = self.find_coordinator(group_id, key_type=key_type)
            try:
                resp = self.send(node, api_key, body)
            except ConnectionFailed:
                cache.pop(group_id, None)
                raise
            err = error_of(resp)
            if err in _COORDINATOR_MOVED or err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                if err in _COORDINATOR_MOVED:
                    cache.pop(group_id, None)
                raise ClientError.from_code(err, what)
            if err and err in retriable:
                e = ClientError.from_code(err, what)
                e.retriable = True
                raise e
            return resp
        return self._with_retries(attempt, what)

    def offset_fetch(self, group_id: str, partitions: list[TopicPartition] | None = None
                     ) -> dict[TopicPartition, tuple[int, str]]:
        """Committed (offset, metadata) per partition; offset -1 = nothing committed. None = all."""
        if partitions is None:
            topics = None
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]

        def err_of(resp: dict) -> int:
            if resp.get("error_code"):
                return resp["error_code"]
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        return p["error_code"]
            return 0

        resp = self.send_to_coordinator(group_id, ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": topics},
                                        err_of, f"OffsetFetch for group {group_id!r}")
        check(err_of(resp), f"OffsetFetch for group {group_id!r}")
        out: dict[TopicPartition, tuple[int, str]] = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                out[TopicPartition(t["name"], p["partition_index"])] = (p["committed_offset"], p["metadata"] or "")
        return out

    def offset_commit(self, group_id: str, offsets: Mapping[TopicPartition, int | tuple[int, str]], *,
                      generation_id: int = -1, member_id: str = "") -> None:
        """Commit offsets for ``group_id``; raises ClientError on any partition's error."""
        by_topic: dict[str, list[dict]] = {}
        for tp, value in offsets.items():
            offset, meta = (value, "") if isinstance(value, int) else value
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": meta, "commit_timestamp": -1})
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def err_of(resp: dict) -> int:
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        return p["error_code"]
            return 0

        resp = self.send_to_coordinator(group_id, ApiKey.OFFSET_COMMIT, body, err_of, f"OffsetCommit for group {group_id!r}")
        check(err_of(resp), f"OffsetCommit for group {group_id!r}")

    # -- controller -----------------------------------------------------------------------------
    def send_to_controller(self, api_key: ApiKey, body: Mapping[str, Any], error_of: Callable[[dict], int], what: str,
                           timeout: float | None = None) -> dict:
        """Send an admin request to the controller, following it when it moves (NOT_CONTROLLER)."""
        def attempt() -> dict:
            controller = self._cluster.controller_id
            if controller < 0 or self._stale:
                controller = self._refresh_metadata([]).controller_id
            if controller < 0:
                raise ClientError(f"{what}: no controller elected yet", ErrorCode.NOT_CONTROLLER)
            resp = self.send(controller, api_key, body, timeout=timeout)
            if error_of(resp) == ErrorCode.NOT_CONTROLLER:
                raise ClientError.from_code(ErrorCode.NOT_CONTROLLER, what)
            return resp
        deadline = time.monotonic() + (timeout or self.request_timeout) + self.request_timeout
        return self._with_retries(attempt, what, deadline=deadline)
