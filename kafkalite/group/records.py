"""``__consumer_offsets`` records in Kafka's key/value formats (GroupMetadataManager).

key = int16 version + struct: versions 0/1 are offset commits (we write 1, as Kafka 2.x does),
version 2 is group metadata. value = int16 version + struct, null = tombstone. The structs are
the protocol tables' ``OffsetCommitKey/Value`` and ``GroupMetadataKey/Value`` (one generic codec,
no hand-written layouts). Values: offsets version 3 (version 1 when the commit carried an explicit
retention), group metadata version 3.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafkalite.group.state import Group, GroupState, Member, OffsetAndMetadata
from kafkalite.protocol import codec

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3


def _prefixed(name: str, version: int, body: dict[str, Any]) -> bytes:
    return _VERSION.pack(version) + codec.encode_data(name, version, body)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _prefixed("OffsetCommitKey", OFFSET_KEY_VERSION, {"group": group_id, "topic": topic, "partition": partition})


def group_key(group_id: str) -> bytes:
    return _prefixed("GroupMetadataKey", GROUP_KEY_VERSION, {"group": group_id})


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        return _prefixed("OffsetCommitValue", 1, {"offset": om.offset, "metadata": om.metadata,
                                                  "commit_timestamp": om.commit_timestamp,
                                                  "expire_timestamp": om.expire_timestamp})
    return _prefixed("OffsetCommitValue", 3, {"offset": om.offset, "leader_epoch": om.leader_epoch,
                                              "metadata": om.metadata, "commit_timestamp": om.commit_timestamp})


def group_value(group: Group, assignments: dict[str, bytes]) -> bytes:
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms, "subscription": m.metadata_for(group.protocol_name),
                "assignment": assignments.get(m.member_id, b"")}
               for m in group.members.values()]
    return _prefixed("GroupMetadataValue", GROUP_VALUE_VERSION, {
        "protocol_type": group.protocol_type or "", "generation": group.generation,
        "protocol": group.protocol_name, "leader": group.leader_id,
        "current_state_timestamp": group.state_timestamp_ms, "members": members})


@dataclass
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None        # None = tombstone


@dataclass
class GroupRecord:
    group_id: str
    value: dict[str, Any] | None           # decoded GroupMetadataValue, None = tombstone


def decode(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord | None:
    """One record of the offsets topic; None for key versions we do not know (skipped, as Kafka
    would fail; we prefer to keep loading the rest)."""
    (kv,) = _VERSION.unpack_from(key)
    if kv in (0, 1):
        k = codec.decode_data("OffsetCommitKey", kv, memoryview(key)[2:])
        om = None
        if value is not None:
            (vv,) = _VERSION.unpack_from(value)
            v = codec.decode_data("OffsetCommitValue", min(vv, 3), memoryview(value)[2:])
            expire = v.get("expire_timestamp", -1) if vv == 1 else -1
            om = OffsetAndMetadata(v["offset"], v.get("leader_epoch", -1) if vv >= 3 else -1, v["metadata"] or "",
                                   v["commit_timestamp"], expire if expire >= 0 else None)
        return OffsetRecord(k["group"], k["topic"], k["partition"], om)
    if kv == GROUP_KEY_VERSION:
        k = codec.decode_data("GroupMetadataKey", kv, memoryview(key)[2:])
        if value is None:
            return GroupRecord(k["group"], None)
        (vv,) = _VERSION.unpack_from(value)
        return GroupRecord(k["group"], codec.decode_data("GroupMetadataValue", min(vv, 3), memoryview(value)[2:]))
    return None


def group_from_value(group_id: str, value: dict[str, Any], now_ms: int) -> Group:
    """Materialise a loaded group: Stable with its members, or Empty without (Kafka's loadGroup)."""
    group = Group(group_id, generation=value["generation"], protocol_type=value["protocol_type"] or None,
                  protocol_name=value["protocol"], leader_id=value["leader"])
    stamp = value.get("current_state_timestamp", -1)
    group.state_timestamp_ms = stamp if stamp >= 0 else now_ms
    for m in value["members"]:
        member = Member(m["member_id"], m.get("group_instance_id"), m["client_id"], m["client_host"],
                        m.get("rebalance_timeout", -1) if m.get("rebalance_timeout", -1) >= 0 else m["session_timeout"],
                        m["session_timeout"], value["protocol_type"],
                        [(value["protocol"] or "", bytes(m["subscription"]))], bytes(m["assignment"]))
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    return group


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocol subscription (any version: fields we know, rest ignored)."""
    try:
        (version,) = _VERSION.unpack_from(subscription)
        body = codec.decode_data("ConsumerProtocolSubscription", min(max(version, 0), 3), memoryview(subscription)[2:])
        return set(body["topics"])
    except Exception:
        return None
