"""Leader-epoch cache semantics and persistence, LogConfig parsing, checkpoint file format."""
from __future__ import annotations

import pytest

from kafkalite.storage import LogConfig
from kafkalite.storage import checkpoint
from kafkalite.storage.leader_epoch import LeaderEpochCache

pytestmark = pytest.mark.unit


def test_end_offset_for_epoch_follows_offset_for_leader_epoch(tmp_path):
    """Current epoch -> log end; older epoch -> start of the next higher one (with the largest
    known epoch <= requested); below all -> first start; above all or empty -> (-1, -1)."""
    cache = LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.end_offset_for(0, 100) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(3, 40)
    cache.assign(5, 70)
    assert cache.end_offset_for(5, 100) == (5, 100)
    assert cache.end_offset_for(3, 100) == (3, 70)
    assert cache.end_offset_for(4, 100) == (3, 70)
    assert cache.end_offset_for(2, 100) == (1, 40)
    assert cache.end_offset_for(0, 100) == (0, 0)
    assert cache.end_offset_for(6, 100) == (-1, -1)
    assert cache.end_offset_for(-1, 100) == (-1, -1)
    assert not cache.assign(4, 80)                 # older than the latest: ignored


def test_epoch_cache_persists_and_truncates(tmp_path):
    """Every change is written in Kafka's "0\\nN\\nepoch offset" format; truncation from the end
    drops epochs starting at/after the offset, from the start moves the first epoch's start."""
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(4, 25)
    assert open(path).read() == "0\n3\n1 0\n2 10\n4 25\n"
    cache.truncate_from_end(25)
    assert LeaderEpochCache.load(path)[0].entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert LeaderEpochCache.load(path)[0].entries() == [(2, 12)]
    with open(path, "w") as f:
        f.write("0\n2\n5 10\n")                   # count does not match: treated as missing
    assert LeaderEpochCache.load(path)[1] is False


def test_log_config_is_built_from_the_topic_table():
    """LogConfig's fields are exactly the topic keys the table gives a field; its defaults are the
    table's Kafka defaults; the broker's typed values go in as they are (no string round trip);
    a bad value raises a one-line ValueError naming the Kafka property."""
    from dataclasses import fields

    from kafkalite.config import TOPIC_DEFAULTS, TOPIC_KEYS, BrokerConfig
    from kafkalite.storage.config import FIELD_KEYS

    assert {f.name for f in fields(LogConfig)} == {k.field for k in TOPIC_KEYS.values() if k.field}
    default = LogConfig()
    for name, key in FIELD_KEYS.items():
        expected = TOPIC_DEFAULTS[key.name]
        assert getattr(default, name) == (tuple(expected) if key.kind == "list" else expected), name
    broker = BrokerConfig.from_properties({"zookeeper.connect": "h:1", "log.roll.hours": "2"})
    typed = broker.topic_config({"segment.bytes": "1024", "retention.ms": "-1", "min.insync.replicas": "2",
                                 "message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete"})
    cfg = LogConfig.from_topic_config(typed)
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.log_append_time) == (1024, -1, True)
    assert cfg.segment_ms == 2 * 3600 * 1000                      # broker synonym in hours, converted
    assert cfg.cleanup_policy == ("compact", "delete") and cfg.delete_enabled and cfg.compact_enabled
    assert LogConfig().flush_messages == 2**63 - 1 and LogConfig().max_message_bytes == 1048588
    for bad, needle in [({"segment_bytes": 3}, "segment.bytes"), ({"retention_ms": -2}, "retention.ms"),
                        ({"message_timestamp_type": "Now"}, "message.timestamp.type"),
                        ({"cleanup_policy": ("keep",)}, "cleanup.policy"),
                        ({"min_cleanable_dirty_ratio": 1.5}, "min.cleanable.dirty.ratio"),
                        ({"segment_bytes": "1024"}, "segment.bytes")]:
        with pytest.raises(ValueError, match=needle) as e:
            LogConfig(**bad)
        assert "\n" not in str(e.value)
    with pytest.raises(TypeError):
        LogConfig(cleanup_policy="compact")                    # a list property takes a list


def test_offset_checkpoint_format_and_validation(tmp_path):
    """Offset checkpoints are "0\\nN\\ntopic partition offset" lines; a wrong count is rejected."""
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint.write_offsets(path, {("a.b-c", 3): 42, ("x", 0): 7})
    assert open(path).read() == "0\n2\na.b-c 3 42\nx 0 7\n"
    assert checkpoint.read_offsets(path) == {("a.b-c", 3): 42, ("x", 0): 7}
    assert checkpoint.read_offsets(str(tmp_path / "missing")) == {}
    with open(path, "w") as f:
        f.write("0\n3\nx 0 7\n")
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.read_offsets(path)
