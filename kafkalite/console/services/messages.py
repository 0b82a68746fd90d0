"""Messages: browse a topic (bounded), search within a window, produce one record.

Browsing never reads a whole partition: each partition is read from its start point for at most
``ceil(budget / partitions)`` offsets (``budget`` is the page size, or the search window when
searching) and never past the end offset taken when the browse began (the high watermark, or the
last stable offset under read_committed), so a busy topic cannot make a page view run forever.
"""
from __future__ import annotations

import json
import math
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.cluster import TopicPartition
from kafkalite.client.consumer import Consumer, ConsumerRecord
from kafkalite.client.producer import Producer, RecordMetadata
from kafkalite.registry import serde
from kafkalite.registry.client import RegistryClientError

from ..context import ConsoleContext
from ..decoding import Decoded, Decoder

EARLIEST, LATEST = -2, -1
STARTS = ("beginning", "end", "offset", "timestamp")
MAX_LIMIT = 500
MAX_WINDOW = 10000
#: a browse gives up reading after this long and shows what it has (a stalled leader, say)
BROWSE_DEADLINE_S = 10.0
POLL_RECORDS = 1000


class BadRequest(ValueError):
    """A browse or produce form that cannot be served as asked (shown to the user as is)."""


@dataclass(frozen=True)
class BrowseRequest:
    topic: str
    partition: int | None = None          # None: every partition
    start: str = "end"
    offset: int | None = None
    timestamp_ms: int | None = None
    limit: int = 50
    key_format: str = "auto"
    value_format: str = "auto"
    read_committed: bool = False
    search: str = ""                      # substring of the key or value (decoded text)
    search_in: str = "any"                # key | value | any
    window: int = 1000                    # records read at most when searching

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise BadRequest(f"start must be one of {', '.join(STARTS)}")
        if self.start == "offset" and self.offset is None:
            raise BadRequest("give an offset to start from")
        if self.start == "timestamp" and self.timestamp_ms is None:
            raise BadRequest("give a timestamp to start from")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
        if not 1 <= self.window <= MAX_WINDOW:
            raise BadRequest(f"the search window must be between 1 and {MAX_WINDOW} records")
        if self.search_in not in ("key", "value", "any"):
            raise BadRequest("search in key, value or any")


@dataclass(frozen=True)
class MessageRow:
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Decoded
    value: Decoded
    headers: list[tuple[str, Decoded]]

    @property
    def time_text(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.timestamp / 1000)) + \
            f".{self.timestamp % 1000:03d}Z" if self.timestamp >= 0 else "-"


@dataclass(frozen=True)
class BrowseResult:
    rows: list[MessageRow]
    scanned: int
    #: per partition (start offset read from, end offset not read past, log start)
    ranges: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    complete: bool = True                 # False when the deadline cut the read short


@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    value: str
    key: str = ""
    headers: str = ""                     # one ``name: value`` per line
    partition: int | None = None
    value_format: str = "text"            # text | avro (Avro JSON encoded with <topic>-value's latest schema)
    null_key: bool = True                 # an empty key is sent as null


def parse_headers(text: str) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadRequest(f"header line {n} is not 'name: value'")
        out.append((name.strip(), value.strip().encode()))
    return out


class MessagesService:
    def __init__(self, context: ConsoleContext, decoder: Decoder) -> None:
        self.context = context
        self.decoder = decoder

    def browse(self, req: BrowseRequest) -> BrowseResult:
        return self.context.call(lambda admin: self._browse(req))

    def _browse(self, req: BrowseRequest) -> BrowseResult:
        client = self.context.client
        md = client.metadata([req.topic])
        topic = md.topics.get(req.topic)
        if topic is None or topic.error:
            raise BadRequest(f"topic {req.topic!r} does not exist")
        if req.partition is not None and req.partition not in topic.partitions:
            raise BadRequest(f"topic {req.topic!r} has no partition {req.partition}")
        parts = [req.partition] if req.partition is not None else sorted(topic.partitions)
        tps = [TopicPartition(req.topic, p) for p in parts]
        isolation = 1 if req.read_committed else 0
        starts = {tp: o for tp, (o, _) in client.list_offsets({tp: EARLIEST for tp in tps}, isolation).items()}
        ends = {tp: o for tp, (o, _) in client.list_offsets({tp: LATEST for tp in tps}, isolation).items()}
        budget = req.window if req.search else req.limit
        per_partition = max(1, math.ceil(budget / len(tps)))
        begin = self._start_offsets(req, tps, starts, ends, per_partition, isolation)
        stop = {tp: min(ends[tp], begin[tp] + per_partition) for tp in tps}
        records, complete = self._read(tps, begin, stop, req.read_committed)
        matched = [r for r in (self._row(rec, req) for rec in records) if _matches(r, req)]
        if req.partition is not None:
            matched.sort(key=lambda r: r.offset)
        else:
            matched.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
        rows = matched[-req.limit:] if req.start == "end" else matched[:req.limit]
        ranges = {tp.partition: (begin[tp], stop[tp], starts[tp]) for tp in tps}
        return BrowseResult(rows, len(records), ranges, complete)

    def _start_offsets(self, req: BrowseRequest, tps: list[TopicPartition], starts: dict[TopicPartition, int],
                       ends: dict[TopicPartition, int], per_partition: int, isolation: int) -> dict[TopicPartition, int]:
        if req.start == "beginning":
            return dict(starts)
        if req.start == "end":
            return {tp: max(starts[tp], ends[tp] - per_partition) for tp in tps}
        if req.start == "offset":
            assert req.offset is not None
            return {tp: min(max(starts[tp], req.offset), ends[tp]) for tp in tps}
        assert req.timestamp_ms is not None
        found = self.context.client.list_offsets({tp: req.timestamp_ms for tp in tps}, isolation)
        # -1: no record at or after the time: nothing to show in that partition
        return {tp: ends[tp] if found[tp][0] < 0 else max(starts[tp], found[tp][0]) for tp in tps}

    def _read(self, tps: list[TopicPartition], begin: dict[TopicPartition, int], stop: dict[TopicPartition, int],
              read_committed: bool) -> tuple[list[ConsumerRecord], bool]:
        todo = [tp for tp in tps if begin[tp] < stop[tp]]
        if not todo:
            return [], True
        consumer = Consumer(client=self.context.client, enable_auto_commit=False, auto_offset_reset="none",
                            isolation_level="read_committed" if read_committed else "read_uncommitted",
                            fetch_max_wait_ms=100, max_partition_fetch_bytes=256 * 1024)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + BROWSE_DEADLINE_S
        try:
            consumer.assign(todo)
            for tp in todo:
                consumer.seek(tp, begin[tp])
            active = set(todo)
            while active and time.monotonic() < deadline:
                polled = consumer.poll(timeout_ms=200, max_records=POLL_RECORDS)
                for rec in polled:
                    tp = TopicPartition(rec.topic, rec.partition)
                    if rec.offset < stop[tp]:
                        out.append(rec)
                if len(polled) < POLL_RECORDS:
                    # the consumer's buffer is drained (assign() would drop what it holds): a
                    # partition read up to its stop offset is fetched no more
                    done = {tp for tp in active if consumer.position(tp) >= stop[tp]}
                    if done:
                        active -= done
                        consumer.assign(sorted(active))
            return out, not active
        finally:
            consumer.close(autocommit=False)

    def _row(self, rec: ConsumerRecord, req: BrowseRequest) -> MessageRow:
        return MessageRow(rec.partition, rec.offset, rec.timestamp, rec.timestamp_type,
                          self.decoder.decode(rec.key, req.key_format), self.decoder.decode(rec.value, req.value_format),
                          [(name, self.decoder.decode(value, "auto")) for name, value in rec.headers])

    # -- produce --------------------------------------------------------------------------------
    def produce(self, req: ProduceRequest) -> tuple[int, int]:
        """(partition, offset) of the record written with acks=all."""
        value = self._encode_value(req)
        key = None if req.null_key and req.key == "" else req.key.encode()
        headers = parse_headers(req.headers)
        timeout_s = self.context.settings.request_timeout_ms / 1000.0

        def send(producer: Producer) -> "Future[RecordMetadata]":
            future = producer.send(req.topic, value, key, partition=req.partition, headers=headers)
            producer.flush(timeout_s)
            return future
        future = self.context.produce(send)
        meta = future.result(timeout=0)
        return meta.partition, meta.offset

    def _encode_value(self, req: ProduceRequest) -> bytes:
        if req.value_format == "text":
            return req.value.encode()
        if req.value_format != "avro":
            raise BadRequest("value format must be text or avro")
        registry = self.context.registry
        if registry is None:
            raise BadRequest("producing Avro needs a schema registry (--registry-url)")
        subject = f"{req.topic}-value"
        try:
            version, schema = registry.subject_version(subject, "latest")
        except RegistryClientError as exc:
            raise BadRequest(f"no schema for subject {subject!r}: {exc}") from None
        parsed = serde.parse_avro(schema.schema, schema.dependencies)
        try:
            datum: Any = serde.from_json(parsed, json.dumps(json.loads(req.value)))
            return serde.encode(schema.schema_id, parsed, datum)
        except ValueError as exc:           # not JSON, or not this schema's record (SerdeError)
            raise BadRequest(f"the value is not Avro JSON for {subject} version {version}: {exc}") from None


def _matches(row: MessageRow, req: BrowseRequest) -> bool:
    if not req.search:
        return True
    needle = req.search
    key_hit = needle in row.key.text
    value_hit = needle in row.value.text
    return {"key": key_hit, "value": value_hit, "any": key_hit or value_hit}[req.search_in]
