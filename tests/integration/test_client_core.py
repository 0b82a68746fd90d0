"""kafkalite.client.KafkaClient (the core contract of CLIENT_CONTRACT.md) against real brokers:
bootstrap, ApiVersions negotiation, metadata, routing to leaders, ListOffsets, Fetch, timeouts and
the errors a caller sees."""
from __future__ import annotations

import socket
import time
import uuid

import pytest

from kafkalite.client import ClientError, KafkaClient, TopicPartition
from kafkalite.client.connection import BrokerConnection
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.records import build_batch, iter_records
from tests.support.waiting import wait_for


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(client: KafkaClient, name: str, partitions: int = 1, rf: int = 1) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                        "assignments": [], "configs": []}], "timeout_ms": 15000, "validate_only": False}
    resp = client.send_to_controller(ApiKey.CREATE_TOPICS, body, lambda r: r["topics"][0]["error_code"], "CreateTopics")
    assert resp["topics"][0]["error_code"] == 0, resp


def produce_raw(client: KafkaClient, tp: TopicPartition, values: list[bytes], ts: int = 1_700_000_000_000) -> int:
    batch = build_batch([(ts + i, b"k%d" % i, v, []) for i, v in enumerate(values)])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": tp.topic, "partition_data": [{"index": tp.partition, "records": batch}]}]}
    resp = client.send(client.leader_for(tp), ApiKey.PRODUCE, body)
    part = resp["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 0, part
    return part["base_offset"]


def test_bootstrap_negotiates_versions_and_reads_metadata(broker):
    """Bootstrapping from a list whose first entry is dead still works; the connection picked
    the highest common version per API (Metadata 8, Fetch 11 as the broker advertises)."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()
    with KafkaClient(f"127.0.0.1:{dead_port},{broker.bootstrap}", connect_timeout_ms=2000) as c:
        md = c.metadata()
        assert list(md.brokers) == [broker.broker_id]
        assert md.brokers[broker.broker_id][1] == broker.port
        assert md.controller_id == broker.broker_id
        assert md.cluster_id
        conn = c.connection(broker.broker_id)
        assert conn.version_for(3) == 8
        assert conn.version_for(1) == 11
        assert conn.version_for(0) == 8


def test_partitions_for_unknown_topic_is_one_clear_error(broker):
    with KafkaClient(broker.bootstrap) as c:
        with pytest.raises(ClientError) as info:
            c.partitions_for("no-such-topic-x")
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "no-such-topic-x" in str(info.value) and "\n" not in str(info.value)
        # and metadata did not auto-create it
        assert "no-such-topic-x" not in c.metadata().topics


def test_list_offsets_and_fetch_round_trip(broker):
    """Records produced on the wire come back through fetch/fetch_many, decoded by kafkalite.records;
    earliest/latest/by-timestamp offsets match what was written."""
    topic = unique("core")
    with KafkaClient(broker.bootstrap) as c:
        create_topic(c, topic, partitions=2)
        assert c.partitions_for(topic) == [0, 1]
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert produce_raw(c, tp0, [b"a", b"b", b"c"]) == 0
        assert produce_raw(c, tp0, [b"d"], ts=1_800_000_000_000) == 3
        assert produce_raw(c, tp1, [b"x"]) == 0
        offs = c.list_offsets({tp0: -2, tp1: -1})
        assert offs[tp0][0] == 0 and offs[tp1][0] == 1
        assert c.list_offsets({tp0: 1_700_000_000_001})[tp0][0] == 1
        assert c.list_offsets({tp0: 1_900_000_000_000})[tp0][0] == -1
        f = c.fetch(tp0, 1)
        assert f.error == ErrorCode.NONE and f.high_watermark == 4 and f.log_start_offset == 0
        recs = list(iter_records(f.records, min_offset=1))
        # the far-future timestamp rolled a new segment (log.roll.ms), and a read stops at a
        # segment's end as in Kafka: the next fetch continues from there
        assert [(r.offset, r.value) for r in recs] == [(1, b"b"), (2, b"c")]
        recs = list(iter_records(c.fetch(tp0, 3).records))
        assert [(r.offset, r.value, r.timestamp) for r in recs] == [(3, b"d", 1_800_000_000_000)]
        many = c.fetch_many({tp0: 0, tp1: 0}, max_wait_ms=100)
        assert [r.value for r in iter_records(many[tp1].records)] == [b"x"]
        assert len(list(iter_records(many[tp0].records))) == 3
        # out of range is reported, not raised
        assert c.fetch(tp0, 99, max_wait_ms=0).error == ErrorCode.OFFSET_OUT_OF_RANGE
        # an unknown partition is a clear error
        with pytest.raises(ClientError) as info:
            c.fetch(TopicPartition(topic, 7), 0)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_long_poll_waits_for_max_wait(broker):
    """An empty partition holds the fetch for max_wait_ms (the client's timeout covers it)."""
    topic = unique("poll")
    with KafkaClient(broker.bootstrap, request_timeout_ms=5000) as c:
        create_topic(c, topic)
        start = time.monotonic()
        f = c.fetch(TopicPartition(topic, 0), 0, max_wait_ms=300)
        assert time.monotonic() - start >= 0.25
        assert f.error == ErrorCode.NONE and bytes(f.records) == b""


def test_unreachable_bootstrap_fails_within_timeout():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.monotonic()
    with pytest.raises(ClientError) as info:
        KafkaClient(f"127.0.0.1:{port}", request_timeout_ms=2000, retry_backoff_ms=50)
    assert time.monotonic() - start < 10
    assert f"127.0.0.1:{port}" in str(info.value)


def test_silent_broker_times_out():
    """A listener that accepts but never answers: the connection attempt ends with a timeout error."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        start = time.monotonic()
        with pytest.raises(ClientError) as info:
            BrokerConnection("127.0.0.1", srv.getsockname()[1], node_id=-1, client_id="t",
                             connect_timeout=0.5, request_timeout=0.5)
        assert info.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert time.monotonic() - start < 5
    finally:
        srv.close()


def test_routes_to_leaders_across_a_cluster(cluster_factory):
    """Partitions led by different brokers are fetched from their leaders; any broker bootstraps."""
    cluster = cluster_factory(3)
    topic = unique("routed")
    with KafkaClient(cluster.brokers[2].bootstrap) as c:
        create_topic(c, topic, partitions=3, rf=2)
        # CreateTopics answers once the controller's broker knows the leaders; the broker asked
        # here learns them from ZooKeeper a moment later (LEADER_NOT_AVAILABLE meanwhile, which
        # clients retry, as with Kafka's UpdateMetadata propagation).
        def leaders() -> set[int]:
            return {p.leader for p in c.metadata([topic]).topics[topic].partitions.values()}
        # an answer without partitions (topic known only by its config znode so far) is not "known"
        wait_for(lambda: (seen := leaders()) and -1 not in seen, timeout=30,
                 what="leaders known to the bootstrap broker")
        assert leaders() == {1, 2, 3}
        for p in range(3):
            produce_raw(c, TopicPartition(topic, p), [b"v%d" % p])
        got = c.fetch_many({TopicPartition(topic, p): 0 for p in range(3)})
        assert {tp.partition: [r.value for r in iter_records(f.records)] for tp, f in got.items()} == \
            {0: [b"v0"], 1: [b"v1"], 2: [b"v2"]}
