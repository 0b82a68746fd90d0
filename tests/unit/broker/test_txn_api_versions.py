"""The transaction APIs at Kafka 2.8's versions: every new version (InitProducerId 2-4,
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn/TxnOffsetCommit 3, WriteTxnMarkers 1, all flexible)
goes through the strict codec both ways and the handler; KIP-360's producer id and epoch reach
the coordinator from v3 (a half-given pair is INVALID_REQUEST), PRODUCER_FENCED is answered from
v4 (InitProducerId) / v2 (AddPartitions, AddOffsets, EndTxn) / v3 (TxnOffsetCommit) and becomes
INVALID_PRODUCER_EPOCH below, and TxnOffsetCommit v3 hands the consumer's generation, member and
instance to the group coordinator."""
from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet import defer

from kafkalite.broker import registry
from kafkalite.broker.handlers import (add_offsets_to_txn, add_partitions_to_txn, end_txn, init_producer_id,
                                       txn_offset_commit, write_txn_markers)
from kafkalite.errors import ErrorCode
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.txn.coordinator import InitResult

pytestmark = pytest.mark.unit


class Txns:
    """The transaction coordinator's calls, recorded; answers with ``code``."""

    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        self.code = code
        self.calls: list[tuple] = []

    def init_producer_id(self, *args: Any) -> defer.Deferred:
        self.calls.append(("init",) + args)
        return defer.succeed(InitResult(self.code, 4000 if self.code == 0 else -1, 3 if self.code == 0 else -1))

    def add_partitions(self, *args: Any) -> defer.Deferred:
        self.calls.append(("add",) + args)
        return defer.succeed(self.code)

    def end_txn(self, *args: Any) -> defer.Deferred:
        self.calls.append(("end",) + args)
        return defer.succeed(self.code)


class Groups:
    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        self.code = code
        self.calls: list[tuple] = []

    def partition_of(self, group_id: str) -> int:
        return 7

    def commit_txn_offsets(self, group_id: str, pid: int, epoch: int, offsets: dict, **member: Any) -> defer.Deferred:
        self.calls.append((group_id, pid, epoch, sorted(offsets), member))
        return defer.succeed({tp: self.code for tp in offsets})


def ctx(version: int, txn_code: ErrorCode = ErrorCode.NONE, group_code: ErrorCode = ErrorCode.NONE) -> Any:
    return SimpleNamespace(api_version=version, now_ms=1000,
                           txns=SimpleNamespace(coordinator=Txns(txn_code)),
                           groups=SimpleNamespace(coordinator=Groups(group_code)),
                           metadata=SimpleNamespace(partition_exists=lambda t, p: t == "out"),
                           config={"request.timeout.ms": 1000}, replicas=None,
                           authorize=lambda *action: True,     # no authorizer: everything allowed
                           authorize_by_resource_type=lambda *action: True)


def through_wire(key: ApiKey, version: int, body: dict[str, Any], handler: Any, context: Any) -> dict[str, Any]:
    """Encode the request as a client would, decode it as the broker does, run the handler, and
    encode and decode its answer (strict codec: complete bodies, known keys only)."""
    before = codec.is_strict()
    codec.set_strict(True)
    try:
        frame = b"".join(bytes(p) for p in codec.encode_request(key, version, 1, "t", body))[4:]
        header, decoded = codec.decode_request(frame)
        assert header.api_version == version
        out: list[Any] = []
        handler(context, decoded).addBoth(out.append)
        assert out and not isinstance(out[0], Exception), out
        answer = b"".join(bytes(p) for p in codec.encode_response(key, version, 1, out[0]))
        (size,) = struct.unpack_from(">i", answer)
        assert size == len(answer) - 4
        corr, resp = codec.decode_response(key, version, answer[4:])
        assert corr == 1
        return resp
    finally:
        codec.set_strict(before)          # lenient left behind made later tests in this process lenient


def test_served_ranges_are_kafka_2_8s() -> None:
    """The registry serves the transaction APIs at exactly Kafka 2.8's version ranges."""
    registry.load_handlers()
    table = {k: (lo, hi) for k, lo, hi in registry.advertised()}
    assert [table[k] for k in (22, 24, 25, 26, 27, 28)] == [(0, 4), (0, 3), (0, 3), (0, 3), (0, 1), (0, 3)]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_init_producer_id_every_version(version: int) -> None:
    """Each version answers the coordinator's id and epoch; from v3 the producer's own id and
    epoch are passed on (KIP-360), before v3 the coordinator sees (-1, -1)."""
    body: dict[str, Any] = {"transactional_id": "tx", "transaction_timeout_ms": 60000}
    if version >= 3:
        body.update(producer_id=4000, producer_epoch=2)
    c = ctx(version)
    r = through_wire(ApiKey.INIT_PRODUCER_ID, version, body, init_producer_id.handle_init_producer_id, c)
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, 4000, 3)
    assert c.txns.coordinator.calls == [("init", "tx", 60000) + ((4000, 2) if version >= 3 else (-1, -1))]


@pytest.mark.parametrize("version,expected", [(2, ErrorCode.INVALID_PRODUCER_EPOCH), (3, ErrorCode.INVALID_PRODUCER_EPOCH),
                                              (4, ErrorCode.PRODUCER_FENCED)])
def test_init_producer_id_fenced_code_by_version(version: int, expected: ErrorCode) -> None:
    body: dict[str, Any] = {"transactional_id": "tx", "transaction_timeout_ms": 60000}
    if version >= 3:
        body.update(producer_id=4000, producer_epoch=1)
    r = through_wire(ApiKey.INIT_PRODUCER_ID, version, body, init_producer_id.handle_init_producer_id,
                     ctx(version, ErrorCode.PRODUCER_FENCED))
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (expected, -1, -1)


@pytest.mark.parametrize("pid,epoch", [(4000, -1), (-1, 3)])
def test_init_producer_id_half_given_producer_is_invalid_request(pid: int, epoch: int) -> None:
    """Kafka's KafkaApis: producer id and epoch are both -1 or both set."""
    c = ctx(4)
    r = through_wire(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000,
                                                  "producer_id": pid, "producer_epoch": epoch},
                     init_producer_id.handle_init_producer_id, c)
    assert r["error_code"] == ErrorCode.INVALID_REQUEST and c.txns.coordinator.calls == []


@pytest.mark.parametrize("version", [1, 2, 3])
def test_add_partitions_add_offsets_end_txn_flexible_v3(version: int) -> None:
    """AddPartitionsToTxn, AddOffsetsToTxn and EndTxn at v1-3: PRODUCER_FENCED from v2."""
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    c = ctx(version, ErrorCode.PRODUCER_FENCED)
    r = through_wire(ApiKey.ADD_PARTITIONS_TO_TXN, version,
                     {"transactional_id": "tx", "producer_id": 9, "producer_epoch": 1,
                      "topics": [{"name": "out", "partitions": [0, 1]}]},
                     add_partitions_to_txn.handle_add_partitions_to_txn, c)
    assert [(p["partition_index"], p["error_code"]) for t in r["results"] for p in t["results"]] == [(0, fenced), (1, fenced)]
    r = through_wire(ApiKey.ADD_OFFSETS_TO_TXN, version,
                     {"transactional_id": "tx", "producer_id": 9, "producer_epoch": 1, "group_id": "g"},
                     add_offsets_to_txn.handle_add_offsets_to_txn, c)
    assert r["error_code"] == fenced
    assert c.txns.coordinator.calls[-1] == ("add", "tx", 9, 1, [("__consumer_offsets", 7)])
    ok = ctx(version)
    r = through_wire(ApiKey.END_TXN, version, {"transactional_id": "tx", "producer_id": 9, "producer_epoch": 1,
                                               "committed": True}, end_txn.handle_end_txn, ok)
    assert r["error_code"] == 0 and ok.txns.coordinator.calls == [("end", "tx", 9, 1, True)]


@pytest.mark.parametrize("version", [2, 3])
def test_txn_offset_commit_v3_passes_generation_member_and_instance(version: int) -> None:
    """v3 hands generation, member and instance to the group coordinator and answers its codes
    (ILLEGAL_GENERATION here); v2 passes none. An unknown topic still answers
    UNKNOWN_TOPIC_OR_PARTITION."""
    body: dict[str, Any] = {"transactional_id": "tx", "group_id": "g", "producer_id": 9, "producer_epoch": 1,
                            "topics": [{"name": "out", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                                       "committed_leader_epoch": -1,
                                                                       "committed_metadata": None}]},
                                       {"name": "gone", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                                        "committed_leader_epoch": -1,
                                                                        "committed_metadata": ""}]}]}
    if version >= 3:
        body.update(generation_id=4, member_id="consumer-1", group_instance_id="host-1")
    c = ctx(version, group_code=ErrorCode.ILLEGAL_GENERATION)
    r = through_wire(ApiKey.TXN_OFFSET_COMMIT, version, body, txn_offset_commit.handle_txn_offset_commit, c)
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}
    assert codes == {("out", 0): ErrorCode.ILLEGAL_GENERATION, ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    (call,) = c.groups.coordinator.calls
    assert call[:4] == ("g", 9, 1, [("out", 0)])
    assert call[4] == ({"member_id": "consumer-1", "instance_id": "host-1", "generation": 4} if version >= 3 else {})


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_v1(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """WriteTxnMarkers v0 and v1 (flexible) decode the markers and answer per partition."""
    seen: list[tuple] = []

    def write(replicas: Any, pid: int, epoch: int, commit: bool, coord_epoch: int, tps: list, timeout: int,
              groups: Any) -> defer.Deferred:
        seen.append((pid, epoch, commit, coord_epoch, tps))
        return defer.succeed({tp: ErrorCode.NONE if tp[1] == 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in tps})
    monkeypatch.setattr(write_txn_markers, "write_markers_as_leader", write)
    r = through_wire(ApiKey.WRITE_TXN_MARKERS, version,
                     {"markers": [{"producer_id": 9, "producer_epoch": 2, "transaction_result": True,
                                   "topics": [{"name": "out", "partition_indexes": [0, 1]}], "coordinator_epoch": 5}]},
                     write_txn_markers.handle_write_txn_markers, ctx(version))
    assert seen == [(9, 2, True, 5, [("out", 0), ("out", 1)])]
    assert [(p["partition_index"], p["error_code"]) for m in r["markers"] for t in m["topics"] for p in t["partitions"]] \
        == [(0, 0), (1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
