"""Exactly-once through crashes: three confluent-kafka consume-transform-produce worker processes
(one consumer group, read_committed, send_offsets_to_transaction, every fifth transaction
aborted and rewound) on a 3-broker cluster with RF 3 everywhere, while input keeps arriving. Mid-run
the transaction coordinator of worker 0 is killed with kill -9 and restarted, then the leader of an
output partition; a worker that fails (fenced, fatal error) is restarted with the same
transactional id. At the end a read_committed read of the output holds every input exactly once,
read_uncommitted also the aborted copies, and the group's committed offsets equal the input's end.

Run as a script (``test_eos_workers.py worker <bootstrap> <index> <stop file>``) this file is the
worker.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC, DST, GROUP = "eos-in", "eos-out", "eos-workers"
PARTITIONS = 6
RATE, SECONDS = 150, 24          # input records per second, for this long
TXN_PARTITIONS = 3               # transaction.state.log.num.partitions of the test cluster


def worker(bootstrap: str, index: int, stop_file: str) -> int:
    """Consume, transform, produce in transactions until ``stop_file`` exists and nothing is left."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10000, "max.poll.interval.ms": 120000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"eos-worker-{index}",
                         "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    def note(what: str) -> None:
        """One line per step that can take long, so a worker that did not stop shows where it was."""
        print(f"{time.strftime('%H:%M:%S')} worker {index}: {what}", flush=True)

    note("init_transactions")
    producer.init_transactions(120)
    note("initialised")
    consumer.subscribe([SRC])

    def rewind() -> None:
        """Back to the group's committed positions (those of the last committed transaction)."""
        assigned = consumer.assignment()
        if assigned:
            for tp in consumer.committed(assigned, 60):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    n = 0
    idle = 0
    while True:
        msgs = [m for m in consumer.consume(200, 1.0) if m.error() is None]
        if not msgs:
            idle += 1
            if os.path.exists(stop_file) and idle >= 3:
                note("stop file seen, nothing left: closing")
                break
            continue
        idle = 0
        n += 1
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(DST, key=m.key(), value=m.value(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            if n % 5 == 0:
                producer.abort_transaction(60)
                rewind()
                continue
            producer.commit_transaction(60)
        except KafkaException as exc:
            err = exc.args[0]
            note(f"transaction {n} failed: {err}")
            if err.txn_requires_abort() or err.retriable():
                producer.abort_transaction(60)
                rewind()
                continue
            raise                    # fatal (fenced): the test restarts this worker
    consumer.close()
    note("closed")
    return 0


class Workers:
    """The three worker processes; one that exits before the stop file is restarted."""

    def __init__(self, bootstrap: str, stop_file: Path, log_dir: Path) -> None:
        self.bootstrap, self.stop_file, self.log_dir = bootstrap, stop_file, log_dir
        self.procs: dict[int, subprocess.Popen] = {}
        self.restarts = 0

    def start(self, index: int) -> None:
        log = open(self.log_dir / f"worker-{index}.log", "ab")
        self.procs[index] = subprocess.Popen([sys.executable, __file__, "worker", self.bootstrap, str(index),
                                              str(self.stop_file)], stdout=log, stderr=log,
                                             env={**os.environ, "PYTHONPATH": str(ROOT)})

    def keep_alive(self) -> None:
        for index, proc in list(self.procs.items()):
            if proc.poll() is not None and not self.stop_file.exists():
                self.restarts += 1
                self.start(index)

    def tails(self, lines: int = 6) -> str:
        """The last steps each worker logged (librdkafka's own lines left out)."""
        out = []
        for index in sorted(self.procs):
            path = self.log_dir / f"worker-{index}.log"
            steps = [line for line in path.read_text(errors="replace").splitlines() if not line.startswith("%")]
            out.append(f"worker-{index}.log: " + " | ".join(steps[-lines:]))
        return "\n".join(out)

    def stop(self, timeout: float) -> list[int | None]:
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs.values():
            try:
                codes.append(proc.wait(max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
        return codes


def feed(bootstrap: str, stop: threading.Event, sent: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    start = time.monotonic()
    i = 0
    while not stop.is_set() and time.monotonic() - start < SECONDS:
        due = int((time.monotonic() - start) * RATE)
        while i < due:
            value = b"in-%06d" % i
            p.produce(SRC, key=value, value=value, partition=i % PARTITIONS)
            sent.append(value)
            i += 1
        p.poll(0)
        time.sleep(0.02)
    assert p.flush(120) == 0, "the feed's records were not all acknowledged"


def read(bootstrap: str, isolation: str, expected: int, timeout: float = 90) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-check-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(DST, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            got += [m.value() for m in c.consume(1000, 1.0) if m.error() is None]
            if len(got) >= expected:
                # a little longer: more than expected (duplicates) must show up too
                got += [m.value() for m in c.consume(1000, 2.0) if m.error() is None]
                break
    finally:
        c.close()
    return got


@pytest.mark.fault
def test_three_workers_exactly_once_through_coordinator_and_leader_crashes(cluster_factory: Any, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkalite.group.hashing import partition_for
    from tests.fault.cluster_support import full_isr
    from tests.support.waiting import wait_for

    cluster = cluster_factory(3, {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
                                  "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                                  "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                                  "zookeeper.session.timeout.ms": "6000"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30, "Metadata to name a controller")
    for name in (SRC, DST):
        admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    wait_for(lambda: full_isr(cluster, SRC, 3) and full_isr(cluster, DST, 3), 30, "full ISRs")

    stop_file = tmp_path / "stop"
    workers = Workers(cluster.bootstrap, stop_file, tmp_path)
    sent: list[bytes] = []
    done = threading.Event()
    feeder = threading.Thread(target=feed, args=(cluster.bootstrap, done, sent), daemon=True)
    for i in range(3):
        workers.start(i)
    feeder.start()
    try:
        def leader_of(topic: str, partition: int) -> int:
            md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
            return md.topics[topic].partitions[partition].leader

        def crash(broker_id: int, what: str) -> None:
            broker = cluster.broker(broker_id)
            broker.kill()
            for _ in range(40):              # keep failed workers coming back while it is down
                workers.keep_alive()
                time.sleep(0.1)
            broker.start()
            print(f"eos: killed and restarted broker {broker_id} ({what})")

        wait_for(lambda: len(sent) > RATE * 4, 30, "input flowing")
        wait_for(lambda: "__transaction_state" in admin.list_topics(timeout=5).topics, 30, "__transaction_state")
        coordinator = leader_of("__transaction_state", partition_for("eos-worker-0", TXN_PARTITIONS))
        crash(coordinator, "transaction coordinator of eos-worker-0")
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            workers.keep_alive()
            time.sleep(0.1)
        crash(leader_of(DST, 0), f"leader of {DST}-0")
        while feeder.is_alive():
            workers.keep_alive()
            time.sleep(0.1)
        # every input processed: the group's committed offsets reach the input's end
        ends = [sum(1 for i in range(len(sent)) if i % PARTITIONS == p) for p in range(PARTITIONS)]
        probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})

        def committed_at_end() -> bool:
            workers.keep_alive()
            got = probe.committed([TopicPartition(SRC, p) for p in range(PARTITIONS)], 30)
            return [tp.offset for tp in got] == ends

        try:
            wait_for(committed_at_end, 180, "the group's committed offsets to reach the input's end", interval=0.5)
        finally:
            probe.close()
    finally:
        done.set()
        feeder.join(60)
        codes = workers.stop(120)
    assert all(code == 0 for code in codes), \
        f"workers exited with {codes} after {workers.restarts} restarts; logs in {tmp_path}\n{workers.tails()}"

    out = read(cluster.bootstrap, "read_committed", len(sent))
    assert len(out) == len(sent) and sorted(out) == sorted(sent), \
        f"read_committed holds {len(out)} records for {len(sent)} inputs ({len(set(out))} distinct)"
    raw = read(cluster.bootstrap, "read_uncommitted", len(sent) + 1)
    assert len(raw) > len(sent), "the aborted transactions' records should be visible read_uncommitted"
    print(f"eos: {len(sent)} inputs exactly once; {len(raw) - len(sent)} aborted copies; "
          f"{workers.restarts} worker restarts")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        sys.exit(worker(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    raise SystemExit("usage: test_eos_workers.py worker <bootstrap> <index> <stop file>")
