"""acks=all acknowledgements are not held by follower long-polls (a purgatory lost wake-up).

A follower fetches every partition it follows from one leader in one long-polling Fetch. While
the leader reads that Fetch it records the follower's offsets partition by partition; moving a
high watermark completes a parked acks=all Produce, whose connection at once dispatches the
producer's next Produce, which appends to a partition the Fetch has already read as empty. The
Fetch then waits without having seen that append; it used to sleep until
``replica.fetch.wait.max.ms``, holding the high watermark, on every round. Kafka's purgatory tries
an operation once more after watching it (tryCompleteElseWatch), and so does ours.

Here the follower wait is 5 s, far above any healthy acks=all latency, so a lost wake-up shows
as acknowledgements seconds late (a median of 35 s with a 10 s wait before the fix; about 10 ms
after). The first acknowledgements may still wait up to one follower wait: a partition a
follower starts following while its Fetch to that leader is parked joins the next Fetch (as in
Kafka); only records enqueued after the flow started are measured.
"""
from __future__ import annotations

import statistics
import time

from confluent_kafka.admin import AdminClient, NewTopic
from tests.fault.cluster_support import Streamer, full_isr, zk_states
from tests.support.waiting import wait_for

FETCH_WAIT_MS = 5000


def test_acks_all_not_held_by_follower_long_polls(cluster_factory) -> None:
    """Two partitions led by broker 1 and followed by broker 2 (one Fetch covers both): the
    median acks=all latency of an idempotent confluent-kafka producer stays far below one
    follower fetch wait."""
    cluster = cluster_factory(2, {"replica.fetch.wait.max.ms": str(FETCH_WAIT_MS)})
    topic = "wakeups"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def created() -> bool:
        # the second broker's registration may not have reached the first one's metadata yet
        try:
            admin.create_topics([NewTopic(topic, 2, replica_assignment=[[1, 2], [1, 2]])])[topic].result(30)
        except Exception as exc:  # noqa: BLE001
            if "TOPIC_ALREADY_EXISTS" in str(exc):       # an earlier attempt went through after all
                return True
            if "INVALID_REPLICATION_FACTOR" in str(exc) or "INVALID_REPLICA_ASSIGNMENT" in str(exc):
                return False
            raise
        return True
    wait_for(created, 30, "topic created on both brokers")
    wait_for(lambda: len(zk_states(cluster, topic)) == 2 and full_isr(cluster, topic, 2), 30, "both in the ISR")
    with Streamer(cluster.bootstrap, topic, 2, rate=300) as stream:
        wait_for(lambda: all(stream.count(p) > 20 for p in range(2)), 60, "records flowing")
        start = time.monotonic()

        def latencies() -> list[float]:
            with stream.lock:
                return [ack - enq for p in range(2) for _, enq, ack in stream.acked[p] if enq > start]
        wait_for(lambda: len(latencies()) >= 300, 90, "300 more records acknowledged")
        median = statistics.median(latencies())
    assert median < FETCH_WAIT_MS / 1000 / 2, f"acks=all waits for follower long-polls to expire: median {median:.2f} s"
