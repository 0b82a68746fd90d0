"""Consumer fetch sessions (KIP-227) on in-process brokers: full fetch opens a session,
incremental fetches carry only partitions with news, wait in the purgatory and wake on append."""
from __future__ import annotations

from typing import Any

from tests.support.inprocess import InProcessCluster, produce_body, records

TOPIC = "sess"
FETCH = 1


def part(index: int, offset: int) -> dict[str, Any]:
    return {"partition": index, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}


def fetch_body(session_id: int, epoch: int, parts: list[dict[str, Any]], max_wait_ms: int = 0,
               forgotten: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "partitions": parts}] if parts else [],
            "forgotten_topics_data": forgotten or [], "rack_id": ""}


def answered(resp: dict[str, Any]) -> list[int]:
    return sorted(p["partition_index"] for t in resp["responses"] for p in t["partitions"])


def test_consumer_session_full_then_incremental(inprocess_cluster_factory) -> None:
    """Epoch 0 opens a session (non-zero id, both partitions answered); an incremental fetch
    with nothing new waits max_wait_ms and answers no partition; one parked while a produce
    lands wakes on the append and carries only that partition; a wrong epoch is refused."""
    cluster: InProcessCluster = inprocess_cluster_factory(1)
    cluster.create_topic(TOPIC, 2, 1)
    leader = cluster.leader_of(TOPIC, 0)
    client = cluster.client(leader)
    broker = cluster.brokers[leader]
    full = client.request(FETCH, 11, fetch_body(0, 0, [part(0, 0), part(1, 0)]))
    sid = full["session_id"]
    assert full["error_code"] == 0 and sid != 0 and answered(full) == [0, 1]
    assert broker.fetch_sessions.get(sid) is not None

    idle = client.request(FETCH, 11, fetch_body(sid, 1, [], max_wait_ms=200))
    assert idle["error_code"] == 0 and idle["session_id"] == sid and answered(idle) == []

    parked = client.send(FETCH, 11, fetch_body(sid, 2, [], max_wait_ms=30000))
    cluster.advance(0.05)
    assert not parked.called, "an incremental fetch with nothing new must wait"
    producer = cluster.client(leader, "producer")
    resp = producer.request(0, 8, produce_body(TOPIC, {1: records([b"a", b"b"])}, 1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    woke = cluster.wait(parked, 1.0, "the parked incremental fetch")
    assert answered(woke) == [1]
    entry = woke["responses"][0]["partitions"][0]
    assert entry["high_watermark"] == 2 and len(entry["records"]) > 0

    stale = client.request(FETCH, 11, fetch_body(sid, 2, []))
    assert stale["error_code"] == 71 and stale["session_id"] == 0          # INVALID_FETCH_SESSION_EPOCH
    unknown = client.request(FETCH, 11, fetch_body(sid + 1, 1, []))
    assert unknown["error_code"] == 70                                    # FETCH_SESSION_ID_NOT_FOUND
    # the consumer moved partition 1's offset; forgetting partition 0 leaves only 1 in the session
    nxt = client.request(FETCH, 11, fetch_body(sid, 3, [part(1, 2)], forgotten=[{"topic": TOPIC, "partitions": [0]}]))
    assert nxt["error_code"] == 0 and answered(nxt) == []
    assert [p["partition"] for _, p in broker.fetch_sessions.get(sid).wanted()] == [1]
    closed = client.request(FETCH, 11, fetch_body(sid, -1, [part(1, 2)]))
    assert closed["session_id"] == 0 and answered(closed) == [1] and broker.fetch_sessions.get(sid) is None


def test_fetch_session_metrics_count_sessions_and_partitions(inprocess_cluster_factory) -> None:
    """The broker's /metrics registry reports the sessions kept and the partitions they cache."""
    cluster: InProcessCluster = inprocess_cluster_factory(1)
    cluster.create_topic(TOPIC, 2, 1)
    leader = cluster.leader_of(TOPIC, 0)
    broker = cluster.brokers[leader]
    prefix = "kafka_server_fetchsessioncache_"
    before = broker.metrics_registry.get_sample_value(prefix + "numincrementalfetchsessions")
    full = cluster.client(leader).request(FETCH, 11, fetch_body(0, 0, [part(0, 0), part(1, 0)]))
    assert full["session_id"] != 0
    reg = broker.metrics_registry
    assert reg.get_sample_value(prefix + "numincrementalfetchsessions") == before + 1
    assert reg.get_sample_value(prefix + "numincrementalfetchpartitionscached") >= 2
    assert reg.get_sample_value(prefix + "incrementalfetchsessionevictionspersec_total") == 0


def follower_sessions(cluster: InProcessCluster, leader: int) -> list[Any]:
    cache = cluster.brokers[leader].fetch_sessions
    return [cache.get(sid) for sid in list(cache._sessions) if cache.get(sid).privileged]


def test_followers_replicate_through_sessions_and_recover_from_eviction(inprocess_cluster_factory) -> None:
    """On 3 brokers, the followers hold privileged sessions on the leader and fetch incrementally;
    acks=all produces complete; after the leader drops every session (as an eviction would),
    the followers fall back to full fetches, open new sessions and acks=all completes again."""
    cluster: InProcessCluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, 1, 3)
    leader = cluster.leader_of(TOPIC, 0)
    producer = cluster.client(leader, "producer")

    def produce_all(values: list[bytes]) -> None:
        resp = producer.request(0, 8, produce_body(TOPIC, {0: records(values)}, -1))
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp

    produce_all([b"a", b"b"])
    cache = cluster.brokers[leader].fetch_sessions
    cluster.pump_until(lambda: len(follower_sessions(cluster, leader)) == 2)
    before = cache.incremental_fetches
    produce_all([b"c"])
    assert cache.incremental_fetches > before, "followers should fetch incrementally"
    old = {s.id for s in follower_sessions(cluster, leader)}
    for sid in old:
        cache.remove(sid)
    produce_all([b"d"])
    cluster.pump_until(lambda: len(follower_sessions(cluster, leader)) == 2)
    assert not old & {s.id for s in follower_sessions(cluster, leader)}
    produce_all([b"e"])
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0))
    for b in cluster.brokers:
        assert cluster.partition(b, TOPIC, 0).log.log_end_offset == 5


def test_follower_session_survives_leader_change(inprocess_cluster_factory) -> None:
    """After the leader stops, a follower's fetches go to the new leader (new session there) and
    the remaining replicas stay in step."""
    cluster: InProcessCluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, 1, 3)
    leader = cluster.leader_of(TOPIC, 0)
    resp = cluster.client(leader).request(0, 8, produce_body(TOPIC, {0: records([b"a"])}, -1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    cluster.stop_broker(leader)
    cluster.pump_until(lambda: cluster.leader_of(TOPIC, 0) not in (leader, -1))
    new_leader = cluster.leader_of(TOPIC, 0)
    resp = cluster.client(new_leader).request(0, 8, produce_body(TOPIC, {0: records([b"b"])}, 1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    other = next(b for b in cluster.brokers if b != new_leader)
    cluster.pump_until(lambda: cluster.partition(other, TOPIC, 0).log.log_end_offset == 2)
    cluster.pump_until(lambda: len(follower_sessions(cluster, new_leader)) == 1)


def test_a_woken_fetch_reads_again_only_the_partitions_that_changed(inprocess_cluster_factory) -> None:
    """A fetch that found nothing waits; when an append to one of its partitions wakes it, only
    that partition is read again (the others keep their first, empty entries, which nothing
    changed), and the answer still carries every requested partition with its offsets. One that
    times out reads nothing again. Kafka re-reads all; a follower's session holds hundreds."""
    cluster: InProcessCluster = inprocess_cluster_factory(1)
    cluster.create_topic(TOPIC, 3, 1)
    leader = cluster.leader_of(TOPIC, 0)
    replicas = cluster.brokers[leader].replica_manager
    reads: list[int] = []
    real_read = replicas.read_from

    def counting_read(part: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(part.index)
        return real_read(part, *args, **kwargs)
    replicas.read_from = counting_read           # type: ignore[method-assign]
    client = cluster.client(leader)
    sessionless = {"session_id": 0, "session_epoch": -1}

    parked = client.send(FETCH, 11, {**fetch_body(0, -1, [part(0, 0), part(1, 0), part(2, 0)], max_wait_ms=30000),
                                     **sessionless})
    cluster.advance(0.05)
    assert not parked.called and sorted(reads) == [0, 1, 2], "the first read covers every partition"
    reads.clear()
    producer = cluster.client(leader, "producer")
    resp = producer.request(0, 8, produce_body(TOPIC, {1: records([b"x", b"y"])}, 1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    woke = cluster.wait(parked, 1.0, "the parked fetch")
    assert reads == [1], f"only the appended partition is read again, not {reads}"
    entries = {p["partition_index"]: p for t in woke["responses"] for p in t["partitions"]}
    assert sorted(entries) == [0, 1, 2]
    assert entries[1]["high_watermark"] == 2 and len(entries[1]["records"]) > 0
    assert all(entries[i]["high_watermark"] == 0 and entries[i]["records"] == b"" and entries[i]["error_code"] == 0
               for i in (0, 2))

    reads.clear()
    idle = client.send(FETCH, 11, {**fetch_body(0, -1, [part(0, 0), part(1, 2), part(2, 0)], max_wait_ms=200),
                                   **sessionless})
    answer = cluster.wait(idle, 1.0, "the idle fetch's timeout")
    assert reads == [0, 1, 2], "a fetch that timed out with no change is not read again"
    assert sorted(p["partition_index"] for t in answer["responses"] for p in t["partitions"]) == [0, 1, 2]


def test_a_followers_session_skips_its_idle_partitions(inprocess_cluster_factory) -> None:
    """A follower's incremental fetch reads only the partitions that changed: the idle ones (last
    answered with nothing to copy, not changed since) are neither read nor answered, yet the
    follower stays in their ISRs past replica.lag.time.max.ms, an append to one of them wakes
    the waiting fetch and reaches the follower, and so does the high watermark that follows."""
    cluster: InProcessCluster = inprocess_cluster_factory(2)
    cluster.create_topic(TOPIC, assignment={p: [0, 1] for p in range(4)})
    replicas = cluster.brokers[0].replica_manager
    reads: list[int] = []
    real_read = replicas.read_from

    def counting_read(part: Any, offset: int, limit: int, replica_id: int, *args: Any, **kwargs: Any) -> Any:
        if replica_id >= 0:
            reads.append(part.index)
        return real_read(part, offset, limit, replica_id, *args, **kwargs)
    replicas.read_from = counting_read           # type: ignore[method-assign]
    cluster.pump_until(lambda: len(follower_sessions(cluster, 0)) == 1)
    cluster.advance(3.0)                         # a few idle rounds: every partition answered once
    reads.clear()
    lag_max_s = cluster.brokers[0].config["replica.lag.time.max.ms"] / 1000
    cluster.advance(lag_max_s + 2.0)
    assert reads == [], f"idle partitions were read again: {sorted(set(reads))}"
    assert all(cluster.replicated(TOPIC, p) for p in range(4)), "the follower fell out of an idle partition's ISR"
    # it is caught up as of its latest fetch: an append now does not find it lagging for long
    # (isr_to_shrink drops a follower behind the log end whose caught-up time is too old)
    wait_ms = cluster.brokers[0].config["replica.fetch.wait.max.ms"]
    now_ms = replicas.clock.now_ms()
    assert all(now_ms - cluster.partition(0, TOPIC, p).followers[1].last_caught_up_ms <= 2 * wait_ms for p in range(4))

    resp = cluster.client(0, "producer").request(0, 8, produce_body(TOPIC, {2: records([b"x"])}, -1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
    follower = cluster.partition(1, TOPIC, 2)
    cluster.pump_until(lambda: follower.log.log_end_offset == 1 and follower.high_watermark == 1,
                       what="the record and the high watermark on the follower")
    cluster.advance(2.0)
    assert set(reads) == {2}, f"only the appended partition is read, not {sorted(set(reads))}"
    assert follower_sessions(cluster, 0)[0].partitions[(TOPIC, 2)].idle_since >= 0, "idle again once copied"


def test_retention_on_the_leader_reaches_a_followers_idle_partition(inprocess_cluster_factory) -> None:
    """Retention moving the leader's log start is news for a follower's idle session partition:
    the follower adopts the new log start from the next answer (without the purgatory check, the
    partition stayed idle and the follower kept the deleted records until something else changed)."""
    cluster: InProcessCluster = inprocess_cluster_factory(2)
    cluster.create_topic(TOPIC, assignment={0: [0, 1]}, configs={"retention.ms": "5000"})
    resp = cluster.client(0, "producer").request(0, 8, produce_body(TOPIC, {0: records([b"a", b"b", b"c"])}, -1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
    follower = cluster.partition(1, TOPIC, 0)
    cluster.pump_until(lambda: follower.high_watermark == 3, what="the records and high watermark on the follower")
    cluster.advance(6.0)                         # idle rounds, and the records pass retention.ms
    assert follower_sessions(cluster, 0)[0].partitions[(TOPIC, 0)].idle_since >= 0, "idle once copied"

    cluster.brokers[0].periodic_tasks.retention()
    assert cluster.partition(0, TOPIC, 0).log_start_offset == 3
    cluster.pump_until(lambda: follower.log_start_offset == 3, what="the follower to adopt the leader's log start")
