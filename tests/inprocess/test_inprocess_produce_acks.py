"""Produce acks 0, 1 and all with min.insync.replicas, on three in-process brokers.

Followers are held back by stopping their replica fetchers, so what each acks level waits for
is visible: acks=0 gets nothing back, acks=1 the leader's append, acks=-1 the followers' fetch
(or REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND
when the ISR shrinks below min.insync.replicas while it waits).
"""
from __future__ import annotations

from typing import Any


from kafkalite.errors import ErrorCode
from tests.support.inprocess import InProcessCluster, produce_body, records
from tests.support.deferreds import outcome as fired

TOPIC = "acks"
PRODUCE, API_VERSIONS = 0, 18


def setup(factory: Any, overrides: dict[str, str] | None = None,
          topic_configs: dict[str, str] | None = None) -> tuple[InProcessCluster, int, list[int]]:
    cluster = factory(3, overrides)
    cluster.create_topic(TOPIC, 1, 3, configs=topic_configs)
    leader = cluster.leader_of(TOPIC, 0)
    return cluster, leader, [b for b in sorted(cluster.brokers) if b != leader]


def entry(resp: dict[str, Any]) -> dict[str, Any]:
    return resp["responses"][0]["partition_responses"][0]


def test_acks_0_gets_no_response_and_the_connection_stays_usable(inprocess_cluster_factory) -> None:
    """acks=0: the records are appended, no response is written (the next request's answer
    is the next frame on the connection); a failed acks=0 produce closes the connection."""
    cluster, leader, followers = setup(inprocess_cluster_factory)
    part = cluster.partition(leader, TOPIC, 0)
    client = cluster.client(leader)
    client.send_without_response(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a", b"b"])}, acks=0))
    cluster.pump_until(lambda: part.log_end_offset == 2, what="the acks=0 append")
    cluster.advance(0.2)
    resp = client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp["error_code"] == 0 and not client.closed

    to_follower = cluster.client(followers[0])
    to_follower.send_without_response(PRODUCE, 8, produce_body(TOPIC, {0: records([b"c"])}, acks=0))
    cluster.pump_until(lambda: to_follower.closed, what="the connection closed after a failed acks=0 produce")
    assert part.log_end_offset == 2


def test_acks_1_is_answered_after_the_leader_append_alone(inprocess_cluster_factory) -> None:
    """acks=1 with both followers stopped: answered at once with the base offset, although the
    high watermark has not moved."""
    cluster, leader, followers = setup(inprocess_cluster_factory)
    for f in followers:
        cluster.stop_fetching(f)
    part = cluster.partition(leader, TOPIC, 0)
    client = cluster.client(leader)
    first = entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a", b"b"])}, acks=1), budget_s=0.1))
    second = entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"c"])}, acks=1), budget_s=0.1))
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    assert (second["error_code"], second["base_offset"]) == (0, 2)
    assert part.log_end_offset == 3 and part.high_watermark == 0


def test_acks_all_is_answered_only_once_the_followers_fetched(inprocess_cluster_factory) -> None:
    """acks=-1 waits while the followers are stopped (no answer after 1 s of simulated time),
    and is answered NONE as soon as they fetch the batch, with the HW past it."""
    cluster, leader, followers = setup(inprocess_cluster_factory, {"replica.lag.time.max.ms": "60000"})
    for f in followers:
        cluster.stop_fetching(f)
    part = cluster.partition(leader, TOPIC, 0)
    client = cluster.client(leader)
    answer = fired(client.send(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a", b"b"])}, acks=-1, timeout_ms=30000)))
    cluster.advance(1.0)
    assert not answer, "acks=all answered before the followers had the batch"
    assert part.log_end_offset == 2

    for f in followers:
        cluster.resume_fetching(f)
    cluster.pump_until(lambda: bool(answer), what="the acks=all answer")
    assert entry(answer[0])["error_code"] == 0 and entry(answer[0])["base_offset"] == 0
    assert part.high_watermark == 2
    assert all(cluster.partition(f, TOPIC, 0).log_end_offset == 2 for f in followers)


def test_acks_all_times_out_when_the_followers_do_not_fetch(inprocess_cluster_factory) -> None:
    """acks=-1 with stopped followers (still in the ISR) is answered REQUEST_TIMED_OUT after
    its timeout_ms, not before; the record stays appended on the leader."""
    cluster, leader, followers = setup(inprocess_cluster_factory, {"replica.lag.time.max.ms": "60000"})
    for f in followers:
        cluster.stop_fetching(f)
    client = cluster.client(leader)
    sent_at = cluster.reactor.seconds()
    answer = fired(client.send(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a"])}, acks=-1, timeout_ms=1500)))
    cluster.pump_until(lambda: bool(answer), what="the acks=all answer")
    assert cluster.reactor.seconds() - sent_at >= 1.5
    assert entry(answer[0])["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert cluster.partition(leader, TOPIC, 0).log_end_offset == 1


def test_acks_all_is_refused_before_the_append_when_the_isr_is_below_min_insync(inprocess_cluster_factory) -> None:
    """min.insync.replicas=2 and an ISR shrunk to the leader alone: acks=-1 gets
    NOT_ENOUGH_REPLICAS and nothing is appended; acks=1 still appends."""
    cluster, leader, followers = setup(inprocess_cluster_factory, topic_configs={"min.insync.replicas": "2"})
    part = cluster.partition(leader, TOPIC, 0)
    client = cluster.client(leader)
    assert entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a"])}, acks=1)))["error_code"] == 0
    for f in followers:
        cluster.stop_fetching(f)
    assert entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"b"])}, acks=1)))["error_code"] == 0
    cluster.pump_until(lambda: part.isr == (leader,), what="the ISR shrunk to the leader")

    refused = entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"c"])}, acks=-1)))
    assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert part.log_end_offset == 2, "a NOT_ENOUGH_REPLICAS produce must not append"
    assert entry(client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"d"])}, acks=1)))["error_code"] == 0
    assert part.log_end_offset == 3


def test_acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrinks_while_waiting(
        inprocess_cluster_factory) -> None:
    """min.insync.replicas=3 and a full ISR: the append is accepted; one follower stops, so the
    leader shrinks the ISR to 2 after replica.lag.time.max.ms, the HW then covers the batch,
    and the waiting produce is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (not NONE, not a
    timeout)."""
    cluster, leader, followers = setup(inprocess_cluster_factory, topic_configs={"min.insync.replicas": "3"})
    part = cluster.partition(leader, TOPIC, 0)
    cluster.stop_fetching(followers[0])
    client = cluster.client(leader)
    answer = fired(client.send(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a"])}, acks=-1, timeout_ms=20000)))
    cluster.pump_until(lambda: bool(answer), what="the acks=all answer")
    assert entry(answer[0])["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert followers[0] not in part.isr and part.high_watermark == 1


def test_acks_all_produces_on_one_connection_are_appended_while_the_first_waits(inprocess_cluster_factory) -> None:
    """Three acks=all Produces pipelined on one connection while the followers are stopped: all
    three are appended at once (the first's replication wait does not hold the others in the
    socket), none is answered; once the followers fetch, the answers arrive in request order
    with consecutive offsets. A Metadata request sent behind them is answered only after them."""
    cluster, leader, followers = setup(inprocess_cluster_factory, {"replica.lag.time.max.ms": "60000"})
    for f in followers:
        cluster.stop_fetching(f)
    part = cluster.partition(leader, TOPIC, 0)
    client = cluster.client(leader)
    order: list[str] = []
    answers = []
    for i, payload in enumerate((b"a", b"b", b"c")):
        d = client.send(PRODUCE, 8, produce_body(TOPIC, {0: records([payload])}, acks=-1, timeout_ms=30000))
        d.addCallback(lambda resp, i=i: (order.append(f"produce {i}"), resp)[1])
        answers.append(fired(d))
    metadata = client.send(3, 1, {"topics": [{"name": TOPIC}]})
    metadata.addCallback(lambda resp: order.append("metadata"))
    cluster.pump_until(lambda: part.log_end_offset == 3, what="all three Produces appended")
    cluster.advance(0.5)
    assert not order, "answered before the followers had the batches"
    for f in followers:
        cluster.resume_fetching(f)
    cluster.pump_until(lambda: "metadata" in order, what="every answer")
    assert order == ["produce 0", "produce 1", "produce 2", "metadata"]
    assert [(entry(a[0])["error_code"], entry(a[0])["base_offset"]) for a in answers] == [(0, 0), (0, 1), (0, 2)]
    assert part.high_watermark == 3


def test_a_parked_follower_fetch_gets_every_partition_of_one_produce(inprocess_cluster_factory) -> None:
    """A follower's Fetch parked on two partitions of the leader; one Produce appends to both.
    The Fetch is answered once, after both appends, with the records of both partitions (Kafka
    2.8 wakes delayed fetches after the whole request's appends, its ActionQueue), not at the
    first append with the second partition left for its next round trip, which an acks=all
    Produce on both would wait for."""
    cluster = inprocess_cluster_factory(2, {"replica.lag.time.max.ms": "60000"})
    leader, follower_id = sorted(cluster.brokers)
    cluster.create_topic(TOPIC, 2, 2, assignment={0: [leader, follower_id], 1: [leader, follower_id]})
    cluster.stop_fetching(follower_id)
    client = cluster.client(leader)
    parts = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": 0,
              "partition_max_bytes": 1 << 20} for p in (0, 1)]
    fetch = {"replica_id": follower_id, "max_wait_ms": 30000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": parts}],
             "forgotten_topics_data": [], "rack_id": ""}
    follower = cluster.client(leader, client_id="as-the-follower")
    answer = fired(follower.send(1, 11, fetch))
    cluster.advance(0.1)
    assert not answer, "the follower's Fetch was answered before anything was appended"
    produced = client.request(PRODUCE, 8, produce_body(TOPIC, {0: records([b"a"]), 1: records([b"b", b"c"])}, acks=1))
    assert [p["error_code"] for p in produced["responses"][0]["partition_responses"]] == [0, 0]
    cluster.pump_until(lambda: bool(answer), what="the follower's Fetch answer")
    sizes = {p["partition_index"]: len(p["records"] or b"") for t in answer[0]["responses"] for p in t["partitions"]}
    assert sizes[0] > 0 and sizes[1] > 0, f"one Produce's appends came in separate answers: {sizes}"
