"""The config and status topics' records as Kafka writes them, replayed into state (no broker:
the replay functions are fed records directly)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkalite.connect.runtime.kafka_stores import ConfigUpdate, KafkaConfigStore, KafkaStatusStore
from kafkalite.connect.runtime.offsets import FileOffsetStore, OffsetStorageReader, OffsetStorageWriter
from kafkalite.connect.runtime.worker_config import WorkerConfig


def _config() -> WorkerConfig:
    return WorkerConfig.parse({"key.converter": "x", "value.converter": "y", "group.id": "g",
                               "config.storage.topic": "c", "offset.storage.topic": "o",
                               "status.storage.topic": "s"}, distributed=True)


def _j(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_config_topic_replay_applies_task_configs_only_once_committed() -> None:
    updates: list[ConfigUpdate] = []
    store = KafkaConfigStore(_config(), updates.append)
    feed = [(b"connector-src", _j({"properties": {"connector.class": "FileStreamSource", "topic": "t"}})),
            (b"task-src-0", _j({"properties": {"topic": "t", "n": "0"}})),
            (b"task-src-1", _j({"properties": {"topic": "t", "n": "1"}}))]
    for offset, (k, v) in enumerate(feed):
        store._apply(k, v, 0, offset)
    assert store.state.connectors == {"src": {"connector.class": "FileStreamSource", "topic": "t"}}
    assert "src" not in store.state.tasks                      # not committed yet
    store._apply(b"commit-src", _j({"tasks": 2}), 0, 3)
    assert [t["n"] for t in store.state.tasks["src"]] == ["0", "1"] and store.state.offset == 4
    store._apply(b"target-state-src", _j({"state": "PAUSED"}), 0, 4)
    assert store.state.target("src") == "PAUSED"
    store._apply(b"restart-connector-src", _j({"include-tasks": True, "only-failed": False}), 0, 5)
    assert updates[-1].restarts == [("src", True, False)]
    store._apply(b"commit-src", _j({"tasks": 3}), 0, 6)          # a commit without its task records
    assert len(store.state.tasks["src"]) == 2
    store._apply(b"connector-src", None, 0, 7)
    assert store.state.connectors == {} and store.state.tasks == {} and updates[-1].removed == {"src"}
    store._apply(b"connector-bad", b"{not json", 0, 8)           # skipped, not fatal
    assert store.state.offset == 9


def test_status_topic_replay_ignores_stale_generations_and_reads_topics() -> None:
    store = KafkaStatusStore(_config())
    store._replay(b"status-task-sink-2", _j({"state": "RUNNING", "trace": None, "worker_id": "w2:8083",
                                             "generation": 5}), 0, 0)
    store._replay(b"status-task-sink-2", _j({"state": "UNASSIGNED", "trace": None, "worker_id": "w1:8083",
                                             "generation": 4}), 0, 1)
    s = store.get_task("sink", 2)
    assert s is not None and (s.state, s.worker_id) == ("RUNNING", "w2:8083")
    store._replay(b"status-connector-sink", _j({"state": "FAILED", "trace": "boom", "worker_id": "w1:8083",
                                                "generation": 5}), 0, 2)
    assert store.get("sink") is not None and store.get("sink").rest() == {"state": "FAILED", "worker_id": "w1:8083",
                                                                          "trace": "boom"}
    store._replay(b"status-topic-orders:connector-sink",
                  _j({"topic": {"name": "orders", "connector": "sink", "task": 0, "discoverTimestamp": 1}}), 0, 3)
    assert store.topics("sink") == ["orders"]
    store._replay(b"status-connector-sink", None, 0, 4)
    assert store.get("sink") is None


def test_file_offsets_round_trip_and_key_order_does_not_matter(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    store = FileOffsetStore(str(path))
    writer = OffsetStorageWriter(store, "c")
    writer.offset({"filename": "a", "shard": 1}, {"position": 10})
    writer.flush(writer.take())
    again = FileOffsetStore(str(path))
    reader = OffsetStorageReader(again, "c")
    assert reader.offset({"shard": 1, "filename": "a"}) == {"position": 10}
    assert reader.offsets([{"filename": "a", "shard": 1}]) == {(("filename", "a"), ("shard", 1)): {"position": 10}}
    assert OffsetStorageReader(again, "other").offset({"filename": "a", "shard": 1}) is None
    writer.offset({"filename": "a", "shard": 1}, None)         # a reset is a tombstone
    writer.flush(writer.take())
    assert OffsetStorageReader(FileOffsetStore(str(path)), "c").offset({"filename": "a", "shard": 1}) is None
