"""Log compaction on a real broker, read back with confluent-kafka: a keyed topic with many
updates and deletes compacts to the latest value per key, tombstones stay for delete.retention.ms
and then go, offsets never change; keyless records on a compacted topic get INVALID_RECORD."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.reports import merge_report
from tests.support.waiting import wait_for
from tests.support.topics import create_topic, wait_controller

CLEANER = {"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "10000"}
INVALID_RECORD = 87


def produce_all(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes | None]]) -> dict[int, tuple]:
    """Produce in order (one partition, idempotent); offset -> (key, value) from delivery reports."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                  "batch.size": 4000})
    acked: dict[int, tuple] = {}
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    for key, value in pairs:
        p.produce(topic, value, key=key, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors
    return acked


def read_all(bootstrap: str, topic: str, last: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from offset 0 up to ``last`` (the log's last offset, never compacted away:
    it is in the active segment)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 60
    try:
        while (not out or out[-1][0] < last) and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    assert out and out[-1][0] == last, "the log's last record was not read back"
    return out


def log_bytes(b: Any, topic: str) -> int:
    d = Path(b.dir) / "data" / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log"))


def check_offsets_unchanged(records: list[tuple], acked: dict[int, tuple]) -> None:
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must be unique and increasing"
    for offset, key, value in records:
        assert acked[offset] == (key, value), f"record at offset {offset} is not what was produced there"


def test_keyed_topic_compacts_to_latest_values_and_tombstones_expire(cluster_factory) -> None:
    """3,000 updates over 50 keys, tombstones for 10 of them, then filler on other keys so that
    everything before lies in inactive segments. The cleaner (running every 100 ms) brings the log
    down to about one record per key; every record read back sits at the offset it was produced
    at with its value; each live key reads its latest value; a deleted key reads only its
    tombstone until delete.retention.ms (10 s) after the first pass, then nothing at all."""
    cluster = cluster_factory(1, CLEANER)
    b = cluster.brokers[0]
    wait_controller(b)
    topic = f"compacted-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic, configs=TOPIC_CONFIG)

    updates = [(b"key-%d" % (i % 50), b"value-%d-%d" % (i % 50, i) * 3) for i in range(3000)]
    deletes = [(b"key-%d" % k, None) for k in range(10)]
    filler = [(b"filler-%d" % (i % 5), b"f" * 100) for i in range(300)]
    acked = produce_all(b.bootstrap, topic, updates + deletes + filler)
    last = max(acked)
    assert last == len(updates) + len(deletes) + len(filler) - 1
    size_before = sum(len(k or b"") + len(v or b"") for k, v in acked.values())
    latest: dict[bytes, int] = {}
    for offset in sorted(acked):
        latest[acked[offset][0]] = offset

    def compacted() -> list[tuple] | None:
        recs = read_all(b.bootstrap, topic, last)
        below_filler = [r for r in recs if r[0] < len(updates) + len(deletes)]
        return recs if len(below_filler) == 50 else None

    recs = wait_for(compacted, 60, "the keyed records to compact to one per key", interval=0.3)
    check_offsets_unchanged(recs, acked)
    by_key = {}
    for offset, key, value in recs:
        by_key[key] = (offset, value)
    for k in range(50):
        key = b"key-%d" % k
        assert by_key[key][0] == latest[key], f"{key!r} does not read its latest record"
        if k < 10:
            assert by_key[key][1] is None, "the tombstone must stay for delete.retention.ms"
    on_disk = log_bytes(b, topic)

    def tombstones_gone() -> list[tuple] | None:
        recs = read_all(b.bootstrap, topic, last)
        return recs if not any(r[1] in {b"key-%d" % k for k in range(10)} for r in recs) else None

    recs = wait_for(tombstones_gone, 60, "the tombstones to expire", interval=0.5)
    check_offsets_unchanged(recs, acked)
    keys = {key for _, key, _ in recs}
    assert {b"key-%d" % k for k in range(10, 50)} <= keys
    for offset, key, value in recs:
        if key.startswith(b"key-"):
            assert offset == latest[key]
    print(f"\ncompacted topic: {len(acked)} records ({size_before} key+value bytes) -> {len(recs)} records; "
          f"{on_disk} bytes of segments once compacted")


def test_keyless_records_on_a_compacted_topic_get_invalid_record(cluster_factory) -> None:
    """confluent-kafka's delivery report carries INVALID_RECORD (87) for a keyless record on a
    compacted topic; keyed records in the same topic still succeed, and a delete-policy topic
    takes keyless records."""
    from confluent_kafka import Producer

    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    wait_controller(b)
    compacted = f"keyless-{uuid.uuid4().hex[:6]}"
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    create_topic(b, compacted, configs={"cleanup.policy": "compact"})
    create_topic(b, plain)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "retries": 0})
    results: dict[str, Any] = {}

    def report(name: str) -> Any:
        return lambda err, msg: results.__setitem__(name, err)

    p.produce(compacted, b"no key", partition=0, on_delivery=report("keyless"))
    p.flush(30)
    p.produce(compacted, b"keyed", key=b"k", partition=0, on_delivery=report("keyed"))
    p.produce(plain, b"no key", partition=0, on_delivery=report("plain"))
    assert p.flush(30) == 0
    assert results["keyless"] is not None and results["keyless"].code() == INVALID_RECORD, results
    assert results["keyed"] is None and results["plain"] is None, results


def offsets_topic_files(b: Any) -> tuple[int, int]:
    """(bytes, segments) of every __consumer_offsets partition log on the broker."""
    logs = list((Path(b.dir) / "data").glob("__consumer_offsets-*/*.log"))
    return sum(f.stat().st_size for f in logs), len(logs)


def fully_cleaned(b: Any) -> bool:
    """Every offsets partition with inactive segments has been cleaned up to its active segment."""
    data = Path(b.dir) / "data"
    cp_path = data / "cleaner-offset-checkpoint"
    checkpoints = {}
    if cp_path.exists():
        for line in cp_path.read_text().splitlines()[2:]:
            topic, part, offset = line.split(" ")
            checkpoints[(topic, int(part))] = int(offset)
    for d in data.glob("__consumer_offsets-*"):
        bases = sorted(int(f.name[:20]) for f in d.glob("*.log"))
        if len(bases) > 1 and checkpoints.get(("__consumer_offsets", int(d.name.rsplit("-", 1)[1]))) != bases[-1]:
            return False
    return True


def test_consumer_offsets_compaction_shrinks_the_offsets_topic(cluster_factory) -> None:
    """4 groups commit 300 times each (3 partitions per commit) through confluent-kafka with the
    cleaner off; the broker restarts with it on; the __consumer_offsets logs shrink to a fraction
    and every group still fetches its last committed offsets. Figures go to
    var/test-reports/compaction.json."""
    from confluent_kafka import Consumer, TopicPartition

    overrides = {"log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100",
                 "log.segment.delete.delay.ms": "0", "offsets.topic.segment.bytes": "16384"}
    cluster = cluster_factory(1, overrides)
    b = cluster.brokers[0]
    wait_controller(b)
    topic = f"committed-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic, 3)
    groups = [f"group-{g}-{uuid.uuid4().hex[:4]}" for g in range(4)]
    commits = 300

    def committed(group: str) -> list[int]:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)]
        finally:
            c.close()

    for g, group in enumerate(groups):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            for i in range(commits):
                c.commit(offsets=[TopicPartition(topic, p, 1000 * g + i + p) for p in range(3)], asynchronous=False)
        finally:
            c.close()
    final = {group: [1000 * g + commits - 1 + p for p in range(3)] for g, group in enumerate(groups)}
    for group in groups:
        assert committed(group) == final[group]
    code = b.stop()
    assert code == 0, f"broker exited with {code}:\n{b.tail(60)}"
    bytes_before, segments_before = offsets_topic_files(b)

    b.overrides["log.cleaner.enable"] = "true"
    b.start()
    wait_for(lambda: fully_cleaned(b), 60, "the cleaner to compact every __consumer_offsets partition", interval=0.2)
    bytes_after, segments_after = offsets_topic_files(b)
    for group in groups:
        assert wait_for(lambda g=group: committed(g) == final[g] or None, 30, f"{group}'s offsets after compaction")
    assert bytes_after < bytes_before / 4, (bytes_before, bytes_after)
    merge_report("compaction", "__consumer_offsets", {
        "groups": len(groups), "commits_per_group": commits, "partitions_per_commit": 3,
        "offset_records_written": len(groups) * commits * 3,
        "bytes_before": bytes_before, "bytes_after": bytes_after,
        "segments_before": segments_before, "segments_after": segments_after,
        "ratio": round(bytes_after / bytes_before, 4)})
    print(f"\n__consumer_offsets: {bytes_before} bytes in {segments_before} segments -> "
          f"{bytes_after} bytes in {segments_after} segments ({len(groups)} groups x {commits} commits)")
