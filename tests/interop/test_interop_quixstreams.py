"""Quix Streams' stateful word count (exactly-once, RocksDB state with a changelog topic) on a
three-broker kafkalite cluster, checked against a plain-Python oracle; a restart on an empty state
directory recovers the counts from the changelog and carries on."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.interop.streams_support import APPS, start_app, stop_app, streams_python, tail
from tests.support.waiting import wait_for

IN, OUT = "quix-words", "quix-word-counts"
CHANGELOG = f"changelog__word-counter--{IN}--default"
FIRST = ["apple", "kiwi", "apple", "fig", "kiwi", "apple", "fig", "plum"] * 3
SECOND = ["kiwi", "apple", "plum", "date"] * 2


def oracle(words: list[str]) -> list[dict[str, Any]]:
    """What the documentation's counter emits: each word with its running count."""
    seen: Counter[str] = Counter()
    out = []
    for w in words:
        seen[w] += 1
        out.append({"word": w, "count": seen[w]})
    return out


def produce(bootstrap: str, words: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for w in words:
        p.produce(IN, key=w.encode(), value=json.dumps({"word": w}).encode())
    assert p.flush(30) == 0


class Reader:
    """A read_committed consumer of the output topic, kept across the test's two phases."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "quix-verifier",
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        self.consumer.subscribe([OUT])
        self.got: list[dict[str, Any]] = []

    def poll(self, want: int) -> bool:
        m = self.consumer.poll(0.5)
        if m is not None and m.error() is None:
            self.got.append(json.loads(m.value()))
        return len(self.got) >= want


def by_word(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per-word sequences (partitions keep each key's order, not the order across keys)."""
    out: dict[str, list[int]] = {}
    for r in records:
        out.setdefault(r["word"], []).append(r["count"])
    return out


def test_quix_stateful_word_count_exactly_once_and_recovery(cluster_factory: Any, tmp_path: Path) -> None:
    python = streams_python("quixstreams")
    cluster = cluster_factory(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(IN, 3, 3), NewTopic(OUT, 3, 3)]).values():
        f.result(30)
    produce(cluster.bootstrap, FIRST)
    log = tmp_path / "quix.log"
    script = str(APPS / "quix_word_count.py")
    reader = Reader(cluster.bootstrap)
    app = start_app(python, [script, cluster.bootstrap, IN, OUT, str(tmp_path / "state-1")], log, tmp_path)
    try:
        wait_for(lambda: reader.poll(len(FIRST)) or app.poll() is not None, 50, "first counts")
        assert app.poll() is None, tail(log)
        assert by_word(reader.got) == by_word(oracle(FIRST)), tail(log)
        # Quix's changelog topic: compacted, one partition per input partition
        md = admin.list_topics(CHANGELOG, timeout=10).topics[CHANGELOG]
        assert md.error is None and len(md.partitions) == 3
        res = ConfigResource(ConfigResource.Type.TOPIC, CHANGELOG)
        configs = admin.describe_configs([res])[res].result(30)
        assert configs["cleanup.policy"].value == "compact"
    finally:
        assert stop_app(app) == 0, tail(log)
    # a new Application on an empty state directory restores the state from the changelog
    produce(cluster.bootstrap, SECOND)
    app = start_app(python, [script, cluster.bootstrap, IN, OUT, str(tmp_path / "state-2")], log, tmp_path)
    try:
        wait_for(lambda: reader.poll(len(FIRST) + len(SECOND)) or app.poll() is not None, 50, "counts after restart")
        assert app.poll() is None, tail(log)
        assert "Recovery process complete" in tail(log, 100_000), tail(log)
    finally:
        stop_app(app)
        reader.consumer.close()
    # exactly once: nothing emitted twice, and the counts continue where they stopped
    assert by_word(reader.got) == by_word(oracle(FIRST + SECOND)), tail(log)
