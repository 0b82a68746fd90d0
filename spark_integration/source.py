"""The ``kafkalite`` PySpark data source: batch and streaming readers with Spark's Kafka schema.

Where each piece runs (pyspark reference §4): ``schema()`` at ``load()`` in a driver-side Python
process; ``partitions()`` at each action in another one, after the reader was pickled;
``read()`` in executor workers. So everything ``read()`` needs travels in :class:`OffsetRange`.

With ``groupId`` the plan is made once, at ``load()``: the DataFrame then stands for exactly one
range per partition (re-running an action re-reads the same records), and the plan rides along
in the ``offset`` column's metadata so :func:`commit_ranges` can commit exactly its end offsets.
Without ``groupId`` each action plans afresh, as Spark's Kafka source does.

With ``keyAvroSubject``/``valueAvroSubject`` (and ``schemaRegistryUrl``) the reader schemas are
resolved once, at ``load()``, and ride along like the plan; the ``key``/``value`` column then has
the Spark type of its reader schema (:mod:`spark_integration.avro`).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import (
    DataSource, DataSourceReader, DataSourceStreamReader, InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType, BinaryType, DataType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from kafkalite.client import KafkaClient, TopicPartition
from spark_integration.broker_io import Planner, ReadSettings, read_range
from spark_integration.options import SourceOptions, parse_options, security_from_options
from spark_integration.planning import (
    PlannedRange, offsets_from_json, offsets_json, plan_ranges, rate_limit, resolve_spec, offset_queries,
    apply_committed, delay_batch, split_ranges,
)

if TYPE_CHECKING:
    from spark_integration.avro import ReaderSchema
    from spark_integration.sink import KafkaliteBatchWriter, KafkaliteStreamWriter

log = logging.getLogger(__name__)

#: Key of the ``offset`` column's metadata that carries a group read's plan.
PLAN_METADATA_KEY = "kafkalite.plan"


@dataclass
class OffsetRange(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition (the end is exclusive)."""

    topic: str
    partition: int
    start: int
    end: int
    settings: ReadSettings


def spark_schema(include_headers: bool, key_type: DataType | None = None,
                 value_type: DataType | None = None) -> StructType:
    """Spark's Kafka-source schema (``KafkaRecordToRowConverter``), every field nullable; an
    Avro-decoded key or value has its reader schema's type instead of ``binary``.

    Built in Python because ``StructType.fromDDL`` needs a JVM, and ``schema()`` runs without one.
    """
    fields = [StructField("key", key_type or BinaryType()), StructField("value", value_type or BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType(
            [StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def _partitions_of(ranges: list[PlannedRange], opts: SourceOptions,
                   avro: tuple[ReaderSchema, ...] = ()) -> list[OffsetRange]:
    settings = ReadSettings.of(opts, avro)
    return [OffsetRange(r.topic, r.partition, r.start, r.end, settings)
            for r in split_ranges(ranges, opts.min_partitions)]


def _read(partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, OffsetRange):     # Spark's stand-in for an empty plan (reference P7)
        return iter(())
    return read_range(partition.topic, partition.partition, partition.start, partition.end, partition.settings)


def _plan_to_json(opts: SourceOptions, ranges: list[PlannedRange]) -> str:
    return json.dumps({"group": opts.group_id, "bootstrap": opts.bootstrap_servers,
                       "ranges": [[r.topic, r.partition, r.start, r.end] for r in ranges]})


class KafkaliteDataSource(DataSource):
    """``spark.read.format("kafkalite")`` / ``spark.readStream.format("kafkalite")``."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def _opts(self, streaming: bool) -> SourceOptions:
        return parse_options(self.options, streaming=streaming)

    def _avro(self, opts: SourceOptions) -> tuple[ReaderSchema, ...]:
        """The reader schemas, asked of the registry once (at load, in schema()) and then pickled
        with this instance to reader()/streamReader(), so the DataFrame's types stay fixed."""
        resolved = getattr(self, "_avro_readers", None)
        if resolved is None:
            resolved = self._avro_readers = avro_readers(opts)
        return resolved

    def schema(self) -> StructType:
        # schema() serves batch and streaming loads alike and cannot tell them apart, so it checks
        # what both share; reader()/streamReader() add the mode's own rules.
        general = parse_options(self.options, streaming=None)
        schema = expected_schema(general, self._avro(general))
        if general.group_id:
            try:
                opts = parse_options(self.options, streaming=False)
            except ValueError:
                return schema                          # not a valid batch read: a streaming query
            with Planner(opts) as planner:
                ranges = planner.plan_batch()
            self._frozen_plan = ranges                 # pickled with this instance to reader()
            plan = _plan_to_json(opts, ranges)
            schema = StructType([f if f.name != "offset" else
                                 StructField(f.name, f.dataType, f.nullable, {PLAN_METADATA_KEY: plan})
                                 for f in schema.fields])
        return schema

    def reader(self, schema: StructType) -> "KafkaliteBatchReader":
        opts = self._opts(streaming=False)
        avro = self._avro(opts)
        _check_schema(schema, opts, avro)
        return KafkaliteBatchReader(opts, getattr(self, "_frozen_plan", None), avro)

    def writer(self, schema: StructType, overwrite: bool) -> "KafkaliteBatchWriter":
        """The sink (:mod:`spark_integration.sink`), Spark's Kafka sink columns and options."""
        from spark_integration.sink import batch_writer
        if overwrite:
            raise ValueError("Save mode Overwrite not allowed for Kafka. Allowed save modes are Append "
                             "(PySpark data sources cannot take ErrorIfExists, Spark's Kafka default).")
        return batch_writer(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "KafkaliteStreamWriter":
        from spark_integration.sink import stream_writer
        return stream_writer(self.options, schema)

    def streamReader(self, schema: StructType) -> "KafkaliteStreamReader":
        opts = self._opts(streaming=True)
        avro = self._avro(opts)
        _check_schema(schema, opts, avro)
        return KafkaliteStreamReader(opts, avro)


def avro_readers(opts: SourceOptions) -> tuple[ReaderSchema, ...]:
    """The key's and value's reader schemas from the registry (none without Avro options)."""
    if not opts.avro_subjects:
        return ()
    from spark_integration.avro import resolve_reader

    assert opts.schema_registry_url is not None          # parse_options insists on it
    return tuple(resolve_reader(a.field, opts.schema_registry_url, a.subject, a.version) for a in opts.avro_subjects)


def expected_schema(opts: SourceOptions, avro: tuple[ReaderSchema, ...]) -> StructType:
    types: dict[str, DataType] = {}
    if avro:
        from spark_integration.avro import spark_type_of
        types = {r.field: spark_type_of(r) for r in avro}
    return spark_schema(opts.include_headers, types.get("key"), types.get("value"))


def _check_schema(schema: StructType, opts: SourceOptions, avro: tuple[ReaderSchema, ...] = ()) -> None:
    expected = expected_schema(opts, avro)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in expected.fields]:
        raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")


class KafkaliteBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, frozen: list[PlannedRange] | None,
                 avro: tuple[ReaderSchema, ...] = ()) -> None:
        self.opts = opts
        self.frozen = frozen
        self.avro = avro

    def partitions(self) -> Sequence[InputPartition]:
        ranges = self.frozen
        if ranges is None:
            with Planner(self.opts) as planner:
                ranges = planner.plan_batch()
        parts = _partitions_of(ranges, self.opts, self.avro)
        # never [] (reference P7): Spark would substitute a bare InputPartition
        return list(parts) or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)


class KafkaliteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offsets in Spark's JSON shape ``{"topic": {"0": next_offset}}``.

    Runs in one long-lived driver-side Python process per query; the planner's client lives on
    ``self`` between calls and is left out when Spark pickles the reader for the executors.
    """

    def __init__(self, opts: SourceOptions, avro: tuple[ReaderSchema, ...] = ()) -> None:
        self.opts = opts
        self.avro = avro
        self.target: dict | None = None
        self._planner: Planner | None = None
        self._latest: dict | None = None          # what reportLatestOffset shows (the backlog's end)
        self._last_trigger_ms = 0                 # minOffsetsPerTrigger / maxTriggerDelay bookkeeping

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.opts)
        return self._planner

    def initialOffset(self) -> dict:
        opts = self.opts
        tps = self.planner.partitions()
        earliest, latest = self.planner.earliest_latest(tps)
        starts = resolve_spec(opts.starting, tps, earliest, latest,
                              self.planner.by_time(offset_queries(opts.starting, tps)),
                              side="starting", timestamp_strategy=opts.starting_timestamp_strategy)
        if opts.group_id:
            starts = apply_committed(starts, self.planner.committed(opts.group_id, tps))
        return offsets_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.partitions()
        self.target = offsets_json(self.planner.earliest_latest(tps)[1])

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        tps = self.planner.partitions()
        earliest, latest = self.planner.earliest_latest(tps)
        if self.target is not None:               # availableNow: never past the snapshot
            target = offsets_from_json(self.target)
            latest = {tp: min(o, target[tp]) for tp, o in latest.items() if tp in target}
        begin = offsets_from_json(start)
        begin = {tp: begin.get(tp, earliest[tp]) for tp in latest}   # new partitions start at earliest
        self._latest = offsets_json(latest)
        if self.target is None:                   # availableNow takes everything up to its snapshot
            new = sum(max(o - begin[tp], 0) for tp, o in latest.items())
            now = int(time.time() * 1000)
            if delay_batch(new, self.opts.min_offsets_per_trigger, self.opts.max_trigger_delay_ms, now,
                           self._last_trigger_ms):
                return start                      # the same offsets: Spark runs no batch this trigger
            self._last_trigger_ms = now
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = rate_limit(begin, {tp: max(o, begin[tp]) for tp, o in latest.items()}, max_rows)
        # a partition that left the subscription keeps its offset so the JSON stays comparable
        for tp, o in offsets_from_json(start).items():
            ends.setdefault(tp, o)
        return offsets_json(ends)

    def reportLatestOffset(self) -> dict | None:
        """The newest offsets seen: Spark's progress shows them as the source's ``latestOffset``
        next to ``endOffset``, so the backlog (back pressure) is visible per trigger."""
        return self._latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        tps = sorted(tp for tp in finish if finish[tp] > begin.get(tp, -1) or tp not in begin)
        if not tps:
            return []
        earliest, latest = self.planner.earliest_latest(tps)
        starts = {tp: begin.get(tp, earliest[tp]) for tp in tps}
        ranges = plan_ranges(tps, starts, {tp: finish[tp] for tp in tps}, earliest,
                             {tp: max(latest[tp], finish[tp]) for tp in tps},
                             fail_on_data_loss=self.opts.fail_on_data_loss)
        return _partitions_of(ranges, self.opts, self.avro)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Spark's source commits nothing; with ``groupId`` (or ``kafka.group.id``) the processed
        offsets go to the group, so ``kafkalite-consumer-groups --describe`` shows the query's lag.
        Spark calls this once the batch's output is committed (the last batch of a run: when the
        next run starts)."""
        if self.opts.commit_group_id:
            self.planner.commit(self.opts.commit_group_id, offsets_from_json(end))

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


def ranges_of(df_or_plan: Any) -> tuple[dict, list[PlannedRange]]:
    """The plan a group read made at ``load()``: from its DataFrame or from the plan JSON."""
    if isinstance(df_or_plan, str):
        plan = json.loads(df_or_plan)
    elif isinstance(df_or_plan, dict):
        plan = df_or_plan
    else:
        try:
            meta = df_or_plan.schema["offset"].metadata
        except (AttributeError, KeyError):
            raise ValueError("commit_ranges needs the DataFrame returned by "
                             "spark.read.format('kafkalite').option('groupId', ...).load()") from None
        if PLAN_METADATA_KEY not in meta:
            raise ValueError("this DataFrame carries no kafkalite plan: read it with the 'groupId' option "
                             "and pass the DataFrame load() returned (or one selecting its 'offset' column)")
        plan = json.loads(meta[PLAN_METADATA_KEY])
    return plan, [PlannedRange(t, int(p), int(s), int(e)) for t, p, s, e in plan["ranges"]]


def commit_ranges(spark: Any, df_or_plan: Any, *, group_id: str | None = None,
                  bootstrap_servers: str | None = None,
                  options: Mapping[str, Any] | None = None) -> dict[tuple[str, int], int]:
    """Commit the end offset of every range a ``groupId`` read planned, through OffsetCommit.

    Call it after the job's output is safely written: the next read of the group starts where
    this one ended. Returns ``{(topic, partition): committed offset}``. ``spark`` is accepted for
    symmetry with Spark APIs (the commit itself happens on the driver, not in a Spark job).
    ``options`` takes the read's ``kafka.security.protocol``/``kafka.sasl.*``/``kafka.ssl.*`` options
    (the plan stored with the DataFrame never carries credentials).
    """
    del spark
    plan, ranges = ranges_of(df_or_plan)
    group = group_id or plan.get("group")
    if not group:
        raise ValueError("commit_ranges: no group id (read with the 'groupId' option or pass group_id=)")
    offsets = {TopicPartition(r.topic, r.partition): r.end for r in ranges}
    security = security_from_options(options or {})
    with KafkaClient(bootstrap_servers or plan["bootstrap"], client_id="kafkalite-spark", security=security) as client:
        client.offset_commit(group, offsets)
    log.info("committed %d partitions for group %s", len(offsets), group)
    return {(tp.topic, tp.partition): o for tp, o in offsets.items()}
