"""The classic consumer group protocol on the client side: ConsumerProtocol bytes, the range and
roundrobin assignors (run by the group leader), and one member's join/sync/heartbeat cycle.

ConsumerProtocol blobs are an int16 version followed by the ``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` struct at that version (encoded by the generic codec). We write
version 1 (Kafka 2.4-2.8's default) and read any version by the fields we know.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from typing import Callable, Sequence

from kafkalite.errors import ErrorCode
from kafkalite.protocol import codec

from kafkalite.protocol.api_keys import ApiKey
from .cluster import TopicPartition
from .core import KafkaClient
from .errors import ClientError, ConnectionFailed

log = logging.getLogger(__name__)

_VERSION = struct.Struct(">h")
PROTOCOL_VERSION = 1


# -- ConsumerProtocol ------------------------------------------------------------------------
def encode_subscription(topics: list[str], user_data: bytes | None = None,
                        owned: Sequence[TopicPartition] = ()) -> bytes:
    body = {"topics": sorted(topics), "user_data": user_data, "owned_partitions": _by_topic(owned, "partitions")}
    return _VERSION.pack(PROTOCOL_VERSION) + codec.encode_data("ConsumerProtocolSubscription", PROTOCOL_VERSION, body)


def decode_subscription(data: bytes) -> list[str]:
    if not data:
        return []
    (version,) = _VERSION.unpack_from(data, 0)
    body = codec.decode_data("ConsumerProtocolSubscription", max(0, min(version, 3)), memoryview(data)[2:])
    return list(body["topics"] or [])


def encode_assignment(partitions: list[TopicPartition], user_data: bytes | None = None) -> bytes:
    body = {"assigned_partitions": _by_topic(partitions, "partitions"), "user_data": user_data}
    return _VERSION.pack(PROTOCOL_VERSION) + codec.encode_data("ConsumerProtocolAssignment", PROTOCOL_VERSION, body)


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    if not data:
        return []
    (version,) = _VERSION.unpack_from(data, 0)
    body = codec.decode_data("ConsumerProtocolAssignment", max(0, min(version, 3)), memoryview(data)[2:])
    return [TopicPartition(t["topic"], p) for t in body["assigned_partitions"] or [] for p in t["partitions"]]


def _by_topic(tps, key: str) -> list[dict]:
    grouped: dict[str, list[int]] = {}
    for tp in tps:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, key: sorted(ps)} for t, ps in sorted(grouped.items())]


# -- assignors (consumer-groups.md §4) ---------------------------------------------------------
def range_assign(subscriptions: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, consecutive ranges to members in member-id order."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        n = partitions.get(topic, 0)
        if not members or n <= 0:
            continue
        q, r = divmod(n, len(members))
        for i, m in enumerate(members):
            start = q * i + min(i, r)
            out[m].extend(TopicPartition(topic, p) for p in range(start, start + q + (1 if i < r else 0)))
    return out


def roundrobin_assign(subscriptions: dict[str, list[str]], partitions: dict[str, int]
                      ) -> dict[str, list[TopicPartition]]:
    """Kafka's RoundRobinAssignor: all partitions sorted, dealt circularly to subscribed members."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    all_tps = [TopicPartition(t, p) for t in sorted({t for ts in subscriptions.values() for t in ts})
               for p in range(partitions.get(t, 0))]
    i = 0
    for tp in all_tps:
        for _ in range(len(members)):
            m = members[i % len(members)]
            i += 1
            if tp.topic in subscriptions[m]:
                out[m].append(tp)
                break
    return out


ASSIGNORS: dict[str, Callable[[dict[str, list[str]], dict[str, int]], dict[str, list[TopicPartition]]]] = {
    "range": range_assign, "roundrobin": roundrobin_assign,
}


# -- membership ------------------------------------------------------------------------------
class GroupMember:
    """One member of a classic group: join, sync, heartbeat in a background thread, leave.

    The join/sync/heartbeat cycle is the same for every group protocol; what a member sends in
    JoinGroup and how the elected leader assigns is the protocol's. This class speaks Kafka's
    ConsumerProtocol (``protocol_type`` "consumer", :meth:`join` returns partitions); other
    protocols (e.g. the schema registry's "sr" leader election) subclass it and override
    :attr:`protocol_type`, :meth:`protocols` and :meth:`assign`, then call :meth:`join_group`.

    ``needs_rejoin`` turns true when a heartbeat learns of a rebalance (or that this member was
    dropped); the owner then calls :meth:`join` (or :meth:`join_group`) again.
    """

    protocol_type = "consumer"

    def __init__(self, client: KafkaClient, group_id: str, *, session_timeout_ms: int = 10000,
                 rebalance_timeout_ms: int = 300000, heartbeat_interval_ms: int = 3000,
                 assignors: Sequence[str] = ("range", "roundrobin")) -> None:
        for name in assignors:
            if name not in ASSIGNORS:
                raise ClientError(f"unknown partition assignment strategy {name!r} (range, roundrobin)")
        self.client = client
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.assignors = list(assignors)
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.needs_rejoin = True
        self._topics: list[str] = []
        self._stop = threading.Event()
        self._hb_lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None

    # -- the group protocol (ConsumerProtocol here; subclasses replace these) -----------------
    def protocols(self) -> list[tuple[str, bytes]]:
        """(protocol name, member metadata) pairs offered in JoinGroup, preferred first."""
        subscription = encode_subscription(self._topics)
        return [(name, subscription) for name in self.assignors]

    def assign(self, protocol: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        """Run by the group's leader: member id -> assignment bytes for every member."""
        subscriptions = {m: decode_subscription(meta) for m, meta in members}
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        md = self.client.metadata(topics) if topics else None
        counts = {t: len(md.topics[t].partitions) for t in topics
                  if md is not None and t in md.topics and not md.topics[t].error}
        plan = ASSIGNORS[protocol](subscriptions, counts)
        return {m: encode_assignment(tps) for m, tps in plan.items()}

    def join(self, topics: list[str], deadline: float) -> list[TopicPartition]:
        """Join (or rejoin) subscribed to ``topics``; returns this member's partitions."""
        self._topics = list(topics)
        return decode_assignment(self.join_group(deadline))

    # -- membership -----------------------------------------------------------------------------
    def join_group(self, deadline: float) -> bytes:
        """Join (or rejoin) and return this member's assignment bytes; retries until ``deadline``."""
        while True:
            if time.monotonic() > deadline:
                raise ClientError(f"joining group {self.group_id!r} timed out", ErrorCode.REQUEST_TIMED_OUT)
            try:
                assignment = self._join_once()
            except ClientError as exc:
                if not exc.retriable and exc.code not in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                                          ErrorCode.REBALANCE_IN_PROGRESS,
                                                          ErrorCode.MEMBER_ID_REQUIRED):
                    raise
                log.debug("group %s: %s, rejoining", self.group_id, exc)
                if exc.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self.member_id, self.generation = ("" if exc.code == ErrorCode.UNKNOWN_MEMBER_ID
                                                       else self.member_id), -1
                if exc.retriable or isinstance(exc, ConnectionFailed):
                    time.sleep(self.client.retry_backoff)
                continue
            self.needs_rejoin = False
            self._start_heartbeat()
            return assignment

    def _join_once(self) -> bytes:
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": self.protocol_type,
                "protocols": [{"name": n, "metadata": meta} for n, meta in self.protocols()]}
        node = self.client.find_coordinator(self.group_id)
        with self._hb_lock:
            resp = self._to_coordinator(node, ApiKey.JOIN_GROUP, body, self.rebalance_timeout_ms / 1000.0 + 5)
        err = resp["error_code"]
        if err == ErrorCode.MEMBER_ID_REQUIRED:        # KIP-394: rejoin with the id given
            self.member_id = resp["member_id"]
            raise ClientError.from_code(err, f"JoinGroup {self.group_id!r}")
        if err:
            raise ClientError.from_code(err, f"JoinGroup {self.group_id!r}")
        self.member_id, self.generation, self.protocol = resp["member_id"], resp["generation_id"], resp["protocol_name"]
        assignments = []
        if resp["leader"] == self.member_id:
            plan = self.assign(resp["protocol_name"], [(m["member_id"], m["metadata"]) for m in resp["members"]])
            assignments = [{"member_id": m, "assignment": a} for m, a in sorted(plan.items())]
        sync = {"group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": self.protocol_type, "protocol_name": self.protocol,
                "assignments": assignments}
        with self._hb_lock:
            resp = self._to_coordinator(node, ApiKey.SYNC_GROUP, sync, self.rebalance_timeout_ms / 1000.0 + 5)
        if resp["error_code"]:
            raise ClientError.from_code(resp["error_code"], f"SyncGroup {self.group_id!r}")
        return bytes(resp["assignment"] or b"")

    def _to_coordinator(self, node: int, api_key: ApiKey, body: dict, timeout: float) -> dict:
        try:
            resp = self.client.send(node, api_key, body, timeout=timeout)
        except ClientError:
            self.client._coordinators.pop(self.group_id, None)
            raise
        if resp.get("error_code") in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.client._coordinators.pop(self.group_id, None)
        return resp

    # -- heartbeat ----------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or not self._heartbeat.is_alive():
            self._stop.clear()
            self._heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{self.group_id}",
                                               daemon=True)
            self._heartbeat.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            if self.needs_rejoin or self.generation < 0:
                continue
            try:
                with self._hb_lock:
                    node = self.client.find_coordinator(self.group_id)
                    resp = self._to_coordinator(node, ApiKey.HEARTBEAT, {
                        "group_id": self.group_id, "generation_id": self.generation,
                        "member_id": self.member_id, "group_instance_id": None}, self.session_timeout_ms / 1000.0)
            except ClientError as exc:
                log.debug("heartbeat for %s failed: %s", self.group_id, exc)
                continue
            err = resp["error_code"]
            if err in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                if err == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.needs_rejoin = True

    def leave(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(self.heartbeat_interval + 1)
        if self.member_id and self.generation >= 0:
            try:
                node = self.client.find_coordinator(self.group_id)
                self.client.send(node, ApiKey.LEAVE_GROUP, {"group_id": self.group_id, "member_id": self.member_id,
                                                            "members": [{"member_id": self.member_id,
                                                                         "group_instance_id": None}]}, timeout=5)
            except ClientError as exc:
                log.debug("LeaveGroup for %s failed: %s", self.group_id, exc)
        self.member_id, self.generation, self.needs_rejoin = "", -1, True
