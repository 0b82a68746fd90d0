"""kill -9 of a follower of the coordinator partitions under an active group and an open
transaction (issue 28): the controller shrinks their ISRs and bumps their leader epochs, the
brokers that stay leaders keep serving without reloading (Kafka loads a coordinator partition
only on becoming its leader), so no client sees an error.

Meanwhile OffsetFetch is asked in a loop (raw requests, any error code recorded) and an admin
``list_consumer_group_offsets`` (librdkafka does not retry COORDINATOR_LOAD_IN_PROGRESS there);
afterwards the consumer commits without a rebalance and the transaction commits.
"""
from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.protocol.api_keys import ApiKey
from tests.fault.cluster_support import zk_states
from tests.support.waiting import wait_for
from tests.support.wire import request as wire_request

TOPIC, GROUP, TXN_ID = "epoch-bump", "epoch-bump-group", "epoch-bump-tx"
OFFSETS, TXNS = "__consumer_offsets", "__transaction_state"


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int:
    def found() -> Any:
        r = wire_request(bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": key, "key_type": key_type})
        return (r["node_id"],) if r["error_code"] == 0 else None      # broker id 0 is a node too
    return wait_for(found, 60, f"a coordinator for {key}")[0]


def test_follower_kill_9_coordinators_keep_serving(cluster_factory: Any, request: Any) -> None:
    # one partition per coordinator topic: its leader is the coordinator of every key
    cluster = cluster_factory(3, {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1",
                                  "transaction.state.log.replication.factor": "3",
                                  "transaction.state.log.num.partitions": "1",
                                  "transaction.state.log.min.isr": "2", "min.insync.replicas": "2"})
    bootstrap = cluster.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    producer.init_transactions(30)                 # creates __transaction_state
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30000})
    request.addfinalizer(consumer.close)
    group_coordinator = coordinator_of(bootstrap, GROUP, 0)
    txn_coordinator = coordinator_of(bootstrap, TXN_ID, 1)
    victim = next(b.broker_id for b in cluster.brokers if b.broker_id not in (group_coordinator, txn_coordinator))
    survivors = [b.broker_id for b in cluster.brokers if b.broker_id != victim]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # the data partition led by a survivor: the kill changes nothing for it but its ISR
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[survivors[0], survivors[1], victim]])])[TOPIC].result(30)
    wait_for(lambda: all(len(s["isr"]) == 3 for t in (OFFSETS, TXNS, TOPIC) for s in zk_states(cluster, t).values()),
             60, "full ISRs")

    # an active group (one member, stable, a committed offset) and an open transaction
    assignments: list[Any] = []
    consumer.subscribe([TOPIC], on_assign=lambda c, ps: assignments.append(ps))
    wait_for(lambda: consumer.poll(0.2) is None and bool(assignments), 60, "the group's assignment")
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    producer.begin_transaction()
    producer.produce(TOPIC, b"before the kill")
    producer.flush(30)

    errors: list[Any] = []
    stop = threading.Event()

    def offset_fetch_loop() -> None:
        coordinator = cluster.broker(group_coordinator).bootstrap
        while not stop.is_set():
            r = wire_request(coordinator, ApiKey.OFFSET_FETCH, 5, {
                "group_id": GROUP, "require_stable": False, "topics": [{"name": TOPIC, "partition_indexes": [0]}]})
            codes = {r["error_code"]} | {p["error_code"] for t in r["topics"] for p in t["partitions"]}
            if codes != {0}:
                errors.append(("OffsetFetch", codes))

    def admin_loop() -> None:
        while not stop.is_set():
            try:
                futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)],
                                                            request_timeout=10)
                futures[GROUP].result(15)
            except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
                errors.append(("list_consumer_group_offsets", exc))

    before = {t: zk_states(cluster, t)[0]["leader_epoch"] for t in (OFFSETS, TXNS)}
    loops = [threading.Thread(target=offset_fetch_loop, daemon=True), threading.Thread(target=admin_loop, daemon=True)]
    for t in loops:
        t.start()
    try:
        cluster.broker(victim).kill()

        def bumped() -> bool:
            consumer.poll(0.1)                     # the member keeps heartbeating
            states = {t: zk_states(cluster, t)[0] for t in (OFFSETS, TXNS)}
            return all(victim not in s["isr"] and s["leader_epoch"] > before[t] for t, s in states.items())
        wait_for(bumped, 40, "the dead follower out of both coordinator partitions' ISRs")
        for _ in range(10):                        # let the brokers apply the new epoch while asked
            consumer.poll(0.1)
    finally:
        stop.set()
        for t in loops:
            t.join(20)
    states = {t: zk_states(cluster, t)[0] for t in (OFFSETS, TXNS)}
    assert (states[OFFSETS]["leader"], states[TXNS]["leader"]) == (group_coordinator, txn_coordinator)
    assert errors == []

    # the group kept its generation (no rebalance) and commits; the transaction commits
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    assert len(assignments) == 1
    producer.produce(TOPIC, b"after the kill")
    producer.commit_transaction(30)
    # and neither coordinator replayed its partition (Kafka's onElection runs for new leaders only)
    for broker_id, topic in ((group_coordinator, OFFSETS), (txn_coordinator, TXNS)):
        text = cluster.broker(broker_id).log_path.read_text(errors="replace")
        assert f"{topic}-0: unloaded" not in text, f"broker {broker_id} unloaded {topic}-0"
