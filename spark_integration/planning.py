"""Offset-range planning: pure functions from partition metadata and offsets to ranges.

Shared by the batch reader, the streaming reader and ``commit_ranges``. Nothing here does I/O:
:class:`spark_integration.source.Planner` asks the brokers (Metadata, ListOffsets, OffsetFetch)
and hands the answers to these functions, so every rule (Spark's option semantics, data-loss
checks, ``minPartitions`` splitting, ``maxOffsetsPerTrigger`` rate limiting) is unit-tested with
plain dicts. Ranges are ``[start, end)``, the end being the "next offset", as in Spark's source.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from kafkalite.topic_partition import TopicPartition
from spark_integration.options import EARLIEST, LATEST, OffsetSpec, SourceOptions

log = logging.getLogger(__name__)


class DataLossError(Exception):
    """Records the plan needs are gone (retention, truncation, a recreated topic).

    Raised unless ``failOnDataLoss=false``; the message names topic, partition and offsets.
    """


@dataclass(frozen=True, order=True)
class PlannedRange:
    """One topic-partition's ``[start, end)`` as decided on the driver."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def select_partitions(opts: SourceOptions, topics: Mapping[str, Iterable[int]],
                      internal: Iterable[str] = ()) -> list[TopicPartition]:
    """The topic-partitions the strategy names, given ``{topic: partitions}`` from Metadata.

    ``subscribe`` skips topics that do not exist (Spark's consumer subscribes and sees nothing);
    ``subscribePattern`` uses ``re.search`` like Spark's ``findFirstIn`` and leaves internal topics
    out; ``assign`` insists the partitions exist, as a read of a missing partition could never end.
    """
    if opts.strategy == "assign":
        missing = [f"{t}-{p}" for t, p in opts.assign if p not in set(topics.get(t, ()))]
        if missing:
            raise ValueError(f"assign: topic-partitions {', '.join(missing)} do not exist")
        return list(opts.assign)
    if opts.strategy == "subscribe":
        names = [t for t in opts.subscribe if t in topics]
        for t in opts.subscribe:
            if t not in topics:
                log.warning("subscribe: topic %s does not exist; nothing is read from it", t)
    else:
        regex = re.compile(opts.pattern or "")
        hidden = set(internal)
        names = sorted(t for t in topics if t not in hidden and regex.search(t))
    return [(t, p) for t in names for p in sorted(topics[t])]


def offset_queries(spec: OffsetSpec, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The ListOffsets-by-time queries a timestamp spec needs (none for the other kinds)."""
    if spec.kind == "timestamp":
        assert spec.timestamp is not None  # options._offset_spec gives this kind its timestamp
        return {tp: spec.timestamp for tp in tps}
    if spec.kind == "timestamps":
        return spec.as_dict()
    return {}


def resolve_spec(spec: OffsetSpec, tps: list[TopicPartition], earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                 by_time: Mapping[TopicPartition, int] | None = None, *, side: str, timestamp_strategy: str = "error"
                 ) -> dict[TopicPartition, int]:
    """Concrete offsets for ``tps``; ``by_time`` holds ListOffsets answers (-1 = no such record)."""
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    option = f"{side}Offsets" if spec.kind == "offsets" else f"{side}OffsetsByTimestamp"
    if spec.kind == "timestamp":
        option = f"{side}Timestamp"
        assert spec.timestamp is not None  # options._offset_spec gives this kind its timestamp
        given = {tp: spec.timestamp for tp in tps}
    else:
        given = spec.as_dict()
        extra = sorted(set(given) - set(tps))
        if extra:
            raise ValueError(f"{option} names topic-partitions that are not read: "
                             + ", ".join(f"{t}-{p}" for t, p in extra))
        missing = [tp for tp in tps if tp not in given]
        if missing:
            raise ValueError(f"{option} must give every topic-partition read; missing "
                             + ", ".join(f"{t}-{p}" for t, p in missing))
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if spec.kind == "offsets":
            value = given[tp]
            out[tp] = earliest[tp] if value == EARLIEST else latest[tp] if value == LATEST else value
            continue
        found = (by_time or {}).get(tp, -1)
        if found >= 0:
            out[tp] = found
        elif side == "starting" and timestamp_strategy == "error":
            raise ValueError(f"No offset matched the timestamp {given[tp]} in {option} for {tp[0]}-{tp[1]}; "
                             "set startingOffsetsByTimestampStrategy=latest to start at the latest offset")
        else:
            out[tp] = latest[tp]
    return out


def apply_committed(starts: Mapping[TopicPartition, int], committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """A group's committed offset replaces the start; partitions without one (-1) keep theirs."""
    return {tp: committed[tp] if committed.get(tp, -1) >= 0 else s for tp, s in starts.items()}


def plan_ranges(tps: list[TopicPartition], starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int],
                latest: Mapping[TopicPartition, int], *, fail_on_data_loss: bool) -> list[PlannedRange]:
    """Check each ``[start, end)`` against what the log holds and clamp it to ``[earliest, latest]``.

    ``latest`` is the high watermark (or the LSO): a range never reaches past it. A start below
    the log start offset or above the latest offset means records were lost (retention, a
    truncated or recreated partition): :class:`DataLossError`, or with ``fail_on_data_loss=False``
    a warning and the nearest readable range, as Spark does.
    """
    out: list[PlannedRange] = []
    for tp in tps:
        topic, partition = tp
        start, end, low, high = starts[tp], ends[tp], earliest[tp], latest[tp]
        if start < low:
            _data_loss(fail_on_data_loss,
                       f"Offsets [{start}, {low}) of {topic}-{partition} are no longer available: the log starts "
                       f"at {low} (deleted by retention?). Some data may have been lost; "
                       "set failOnDataLoss=false to skip them.")
            start = low
        if start > high:
            _data_loss(fail_on_data_loss,
                       f"Start offset {start} of {topic}-{partition} is beyond its latest offset {high}: the "
                       "partition was truncated or the topic recreated. Some data may have been lost; "
                       "set failOnDataLoss=false to read from the latest offset.")
            start = high
        if end > high:
            log.info("end offset %d of %s-%d is past the latest offset %d; reading up to %d",
                     end, topic, partition, high, high)
            end = high
        out.append(PlannedRange(topic, partition, start, max(end, start)))
    return out


def _data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(message)
    log.warning("%s", message)


def split_ranges(ranges: list[PlannedRange], min_partitions: int | None) -> list[PlannedRange]:
    """Spark's ``KafkaOffsetRangeCalculator``: one task per non-empty range, or, when that is fewer
    than ``min_partitions``, each range cut into parts proportional to its share of all offsets."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[PlannedRange] = []
    for r in ranges:
        parts = max(math.floor(r.size / total * min_partitions + 0.5), 1)   # Java's Math.round
        for i in range(parts):
            a = r.start + r.size * i // parts
            b = r.start + r.size * (i + 1) // parts
            if b > a:
                out.append(PlannedRange(r.topic, r.partition, a, b))
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_offsets: int | None) -> dict[TopicPartition, int]:
    """End offsets for one micro-batch: Spark's proportional split of ``maxOffsetsPerTrigger``.

    Each partition gets ``limit * size / total`` offsets, floored, or ceiled when below 1 so small
    partitions are not starved, and never past its latest offset.
    """
    sizes = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(sizes.values())
    if max_offsets is None or total <= max_offsets:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        prorate = max_offsets * sizes[tp] / total
        step = math.floor(prorate) if prorate >= 1 else math.ceil(prorate)
        out[tp] = min(begin + step, end)
    return out


def delay_batch(new_records: int, min_offsets: int | None, max_delay_ms: int, now_ms: int, last_ms: int) -> bool:
    """Spark's ``minOffsetsPerTrigger``/``maxTriggerDelay``: hold the next micro-batch back while
    fewer than ``min_offsets`` records are new, unless ``max_delay_ms`` passed since the last one
    (``last_ms`` 0: no batch yet, so the first is never held)."""
    if min_offsets is None or now_ms - last_ms >= max_delay_ms:
        return False
    return new_records < min_offsets


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON shape ``{"topic": {"0": 42}}`` (string keys, as JSON wants)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}
