"""The source's conversations with the brokers, through :mod:`kafkalite.client`.

Two sides: :class:`Planner` runs on the driver (Metadata, ListOffsets, OffsetFetch, OffsetCommit)
and feeds :mod:`spark_integration.planning`; :func:`read_range` runs in an executor's Python
worker, fetches one ``[start, end)`` from the partition leader and yields Arrow record batches.
Workers are reused across tasks, so clients are cached per process and per bootstrap list; a
client is never pickled (sockets cannot be), only the settings it is made from.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.client.security import PLAINTEXT, ClientSecurity
from kafkalite.errors import ErrorCode
# the plain (topic, partition) key; kafkalite.client.TopicPartition is its named form for client calls
from kafkalite.topic_partition import TopicPartition as TP
from spark_integration.arrow_records import arrow_schema, convert
from spark_integration.options import SourceOptions
from spark_integration.planning import (
    DataLossError, PlannedRange, apply_committed, offset_queries, plan_ranges, resolve_spec, select_partitions,
)

if TYPE_CHECKING:
    from spark_integration.avro import ReaderSchema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadSettings:
    """What a worker needs to read a range; travels inside every Spark partition (picklable)."""

    bootstrap_servers: str
    client_id: str
    include_headers: bool
    fail_on_data_loss: bool
    isolation_level: int
    max_partition_fetch_bytes: int
    request_timeout_ms: int
    poll_timeout_ms: int
    #: the reader schemas of Avro-decoded columns (resolved at load), none for raw bytes
    avro: tuple["ReaderSchema", ...] = ()
    #: TLS and SASL (the kafka.security.protocol/sasl.*/ssl.* options)
    security: ClientSecurity = PLAINTEXT
    #: the ``mode=DROPMALFORMED`` option: a record whose Avro cannot be decoded is dropped and logged
    drop_malformed: bool = False
    #: the ``malformedRecordHandler`` option and its ``malformedRecordHandlerArgs``
    malformed_handler: tuple[str, str] | None = None

    @classmethod
    def of(cls, opts: SourceOptions, avro: tuple["ReaderSchema", ...] = ()) -> "ReadSettings":
        return cls(opts.bootstrap_servers, opts.client_id, opts.include_headers, opts.fail_on_data_loss,
                   opts.isolation_level, opts.max_partition_fetch_bytes, opts.request_timeout_ms,
                   opts.poll_timeout_ms, tuple(avro), opts.security, opts.avro_mode == "DROPMALFORMED",
                   opts.malformed_handler)

    def output_schema(self) -> pa.Schema:
        """The Arrow schema of the batches :func:`read_range` yields (Spark's, Avro columns typed)."""
        schema = arrow_schema(self.include_headers)
        if self.avro:
            from spark_integration.avro import cached_decoder
            for reader in self.avro:
                i = schema.get_field_index(reader.field)
                schema = schema.set(i, pa.field(reader.field, cached_decoder(reader).arrow_type))
        return schema


_clients: dict[tuple, KafkaClient] = {}
_clients_pid = os.getpid()
_clients_lock = threading.Lock()


def cached_client(bootstrap: str, client_id: str, request_timeout_ms: int,
                  security: ClientSecurity = PLAINTEXT) -> KafkaClient:
    """One client per process and settings (a forked worker never reuses its parent's sockets);
    the security settings are part of the key, so two users never share an authenticated client."""
    global _clients_pid
    key = (bootstrap, client_id, request_timeout_ms, security)
    with _clients_lock:
        if _clients_pid != os.getpid():
            _clients.clear()
            _clients_pid = os.getpid()
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = KafkaClient(bootstrap, client_id=client_id,
                                                 request_timeout_ms=request_timeout_ms, security=security)
        return client


def drop_client(bootstrap: str, client_id: str, request_timeout_ms: int,
                security: ClientSecurity = PLAINTEXT) -> None:
    with _clients_lock:
        client = _clients.pop((bootstrap, client_id, request_timeout_ms, security), None)
    if client is not None:
        client.close()


class Planner:
    """Driver-side questions to the cluster; one short-lived client per plan."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.client = KafkaClient(opts.bootstrap_servers, client_id=opts.client_id,
                                  request_timeout_ms=opts.request_timeout_ms, security=opts.security)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[TP]:
        opts = self.opts
        if opts.strategy == "subscribePattern":
            md = self.client.metadata(None)
        else:
            names = sorted({t for t, _ in opts.assign} if opts.strategy == "assign" else set(opts.subscribe))
            md = self.client.metadata(names)
        topics = {name: sorted(t.partitions) for name, t in md.topics.items()
                  if t.error == ErrorCode.NONE and t.partitions}
        internal = [name for name, t in md.topics.items() if t.internal]
        return select_partitions(opts, topics, internal)

    def earliest_latest(self, tps: list[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """Log start offsets and latest offsets (the LSO under read_committed, else the HW)."""
        if not tps:
            return {}, {}
        keys = [TopicPartition(*tp) for tp in tps]
        low = self.client.list_offsets({k: -2 for k in keys})
        high = self.client.list_offsets({k: -1 for k in keys}, isolation_level=self.opts.isolation_level)
        return ({(k.topic, k.partition): low[k][0] for k in keys}, {(k.topic, k.partition): high[k][0] for k in keys})

    def by_time(self, queries: dict[TP, int]) -> dict[TP, int]:
        if not queries:
            return {}
        answers = self.client.list_offsets({TopicPartition(*tp): ts for tp, ts in queries.items()},
                                           isolation_level=self.opts.isolation_level)
        return {(k.topic, k.partition): v[0] for k, v in answers.items()}

    def committed(self, group_id: str, tps: list[TP]) -> dict[TP, int]:
        answers = self.client.offset_fetch(group_id, [TopicPartition(*tp) for tp in tps])
        return {(k.topic, k.partition): v[0] for k, v in answers.items()}

    def commit(self, group_id: str, offsets: dict[TP, int]) -> None:
        if offsets:
            self.client.offset_commit(group_id, {TopicPartition(*tp): int(o) for tp, o in offsets.items()})

    def plan_batch(self) -> list[PlannedRange]:
        """The ranges a batch query reads: start per options or group, end at latest (or as given)."""
        opts = self.opts
        tps = self.partitions()
        if not tps:
            return []
        earliest, latest = self.earliest_latest(tps)
        starts = resolve_spec(opts.starting, tps, earliest, latest, self.by_time(offset_queries(opts.starting, tps)),
                              side="starting", timestamp_strategy=opts.starting_timestamp_strategy)
        if opts.group_id:
            starts = apply_committed(starts, self.committed(opts.group_id, tps))
        ends = resolve_spec(opts.ending, tps, earliest, latest, self.by_time(offset_queries(opts.ending, tps)),
                            side="ending")
        return plan_ranges(tps, starts, ends, earliest, latest, fail_on_data_loss=opts.fail_on_data_loss)


def read_range(topic: str, partition: int, start: int, end: int, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Fetch ``[start, end)`` of one partition from its leader and yield Arrow batches of its rows.

    A fetch answers with whole batches, so rows outside the range are cut off by ``convert``.
    OFFSET_OUT_OF_RANGE (retention deleted the start meanwhile) and a partition that no longer
    reaches ``end`` (truncated after a leader change) are data loss: an error naming topic,
    partition and offsets, or with failOnDataLoss=false a warning and the rest of what exists.
    """
    if end <= start:
        return
    client = cached_client(settings.bootstrap_servers, settings.client_id, settings.request_timeout_ms,
                           settings.security)
    decode = None
    if settings.avro:
        # the raw-bytes path stays as it was; Avro columns are decoded per fetched batch
        from spark_integration.avro import MalformedRecord, decode_columns, malformed_handler
        out_schema = settings.output_schema()
        on_malformed = None
        if settings.malformed_handler is not None:
            spec, args = settings.malformed_handler
            handler = malformed_handler(spec)

            def on_malformed(record: MalformedRecord) -> None:
                handler(args, record)

        def decode(b: pa.RecordBatch) -> pa.RecordBatch:
            return decode_columns(b, settings.avro, out_schema, topic, partition, settings.drop_malformed,
                                  on_malformed)
    tp = TopicPartition(topic, partition)
    offset = start
    stalled_since: float | None = None
    while offset < end:
        fetched = client.fetch(tp, offset, max_bytes=settings.max_partition_fetch_bytes, max_wait_ms=500,
                               isolation_level=settings.isolation_level)
        if fetched.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            low, high = _bounds(client, tp, settings.isolation_level)
            if low > offset:
                _loss(settings, f"Offsets [{offset}, {min(low, end)}) of {topic}-{partition} were deleted before "
                                f"they could be read (the log now starts at {low}). Some data may have been lost; "
                                "set failOnDataLoss=false to skip them.")
                offset = low
                continue
            _loss(settings, f"Offsets [{offset}, {end}) of {topic}-{partition} are beyond the partition's latest "
                            f"offset {high}: it was truncated or recreated. Some data may have been lost; "
                            "set failOnDataLoss=false to skip them.")
            return
        if fetched.error != ErrorCode.NONE:
            raise RuntimeError(f"Fetch {topic}-{partition} at offset {offset}: {fetched.error.name}")
        batch, next_offset = convert(fetched.records, topic=topic, partition=partition, start=offset, end=end,
                                     include_headers=settings.include_headers,
                                     aborted=fetched.aborted_transactions if settings.isolation_level else None)
        if batch is not None and batch.num_rows:
            yield batch if decode is None else decode(batch)
        if next_offset > offset:
            offset = next_offset
            stalled_since = None
            continue
        latest = fetched.last_stable_offset if settings.isolation_level and fetched.last_stable_offset >= 0 \
            else fetched.high_watermark
        if latest <= offset:
            _loss(settings, f"Offsets [{offset}, {end}) of {topic}-{partition} are no longer in the log (its latest "
                            f"offset is now {latest}: truncated after a leader change?). Some data may have been "
                            "lost; set failOnDataLoss=false to skip them.")
            return
        now = time.monotonic()
        stalled_since = stalled_since or now
        if now - stalled_since > settings.poll_timeout_ms / 1000:
            raise TimeoutError(f"Fetch {topic}-{partition} made no progress at offset {offset} for "
                               f"{settings.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")


def _bounds(client: KafkaClient, tp: TopicPartition, isolation_level: int) -> tuple[int, int]:
    low = client.list_offsets({tp: -2})[tp][0]
    high = client.list_offsets({tp: -1}, isolation_level=isolation_level)[tp][0]
    return low, high


def _loss(settings: ReadSettings, message: str) -> None:
    if settings.fail_on_data_loss:
        raise DataLossError(message)
    log.warning("%s", message)
