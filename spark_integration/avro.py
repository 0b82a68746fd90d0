"""Registry-framed Avro keys and values as typed Spark columns (options ``keyAvroSubject`` /
``valueAvroSubject`` with ``schemaRegistryUrl``; docs/schema-registry.md, section "Avro").

The reader schema is the subject's version (``latest`` by default) *as of load()*: the driver
resolves it once (:func:`resolve_reader`), derives the column's Spark type from it
(:func:`spark_type_of`) and ships it, id and text, inside every Spark partition, so every task
decodes to the type the DataFrame declared even if the subject moves on meanwhile. A value names
its writer schema by the 4-byte id after the magic byte; each worker fetches a writer schema once
(per process and id: ids never change meaning) and fastavro resolves each record from its writer
schema to the reader schema (Avro's schema resolution: added fields take their defaults, removed
ones are skipped, int widens to long, ...). A value whose id the registry does not know, one that
is not framed, or one its writer schema cannot be resolved against fails the task with the topic,
partition, offset and id; with ``mode=DROPMALFORMED`` such a record is dropped and logged
instead (:func:`decode_columns`), and handed to the ``malformedRecordHandler`` option's function
if one is set (:class:`MalformedRecord`: how an application such as the SQL server puts it in a log
of its own without this package importing it).

Per batch, not per record where it can be: framing checks and the schema ids of every value come
out of the Arrow buffers with numpy, rows are grouped by id, and only ``schemaless_reader`` runs
per record (fastavro has no batch API); the Python objects become one Arrow column with one
``pa.array`` call. Date, time, timestamp and uuid logical types are decoded as their plain Avro
type (fastavro would build a ``datetime``/``UUID`` per value) and become Spark types by one Arrow
cast per column; decimals come through fastavro's ``Decimal``.

Avro -> Spark types follow Spark's ``from_avro`` (``SchemaConverters``): records are structs,
enums strings, fixed and bytes binary, maps ``map<string, ...>``, ``[null, T]`` a nullable ``T``,
``[int, long]`` long and ``[float, double]`` double; timestamp-millis/-micros ``timestamp``,
local-timestamp-* ``timestamp_ntz``, date ``date``, decimal ``decimal(p, s)``, time-millis ``int``,
time-micros ``long``. Not supported (an error at load): other unions (Spark's
``member0, member1, ...`` structs) and recursive records, which Spark cannot type either.
"""
from __future__ import annotations

import importlib
import io
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import fastavro
import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, DataType, DateType, DecimalType, DoubleType, FloatType, IntegerType,
    LongType, MapType, StringType, StructField, StructType, TimestampNTZType, TimestampType,
)

from kafkalite.registry.client import RegisteredSchema, RegistryClient, RegistryClientError

log = logging.getLogger(__name__)

#: Confluent's registry error code for an unknown schema id.
SCHEMA_NOT_FOUND = 40403
#: Logical types decoded as their underlying Avro type and converted by an Arrow cast.
_PLAIN_LOGICAL = {"timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros",
                  "date", "time-millis", "time-micros", "uuid"}
_PRIMITIVES: dict[str, tuple[DataType, pa.DataType]] = {
    "boolean": (BooleanType(), pa.bool_()), "int": (IntegerType(), pa.int32()), "long": (LongType(), pa.int64()),
    "float": (FloatType(), pa.float32()), "double": (DoubleType(), pa.float64()),
    "bytes": (BinaryType(), pa.binary()), "string": (StringType(), pa.string()),
}


class AvroSchemaError(ValueError):
    """A reader schema the source cannot turn into a Spark type, or a subject it cannot resolve."""


class AvroDecodeError(ValueError):
    """A key or value that cannot be decoded; the message names topic, partition, offset and id
    (``field``: ``key`` or ``value``, once known)."""

    field = ""


@dataclass(frozen=True)
class MalformedRecord:
    """A record ``mode=DROPMALFORMED`` dropped, as the ``malformedRecordHandler`` function gets it."""

    topic: str
    partition: int
    offset: int
    field: str                  # "key" or "value": the column that could not be decoded
    data: bytes | None          # that column's bytes
    cause: str                  # the decoder's message (topic, partition, offset, schema id, error)


#: ``package.module:function``, the ``malformedRecordHandler`` option's form
_HANDLER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_handlers: dict[str, Callable[[str, MalformedRecord], None]] = {}


def malformed_handler(spec: str) -> Callable[[str, MalformedRecord], None]:
    """The function a ``malformedRecordHandler`` option names (``package.module:function``),
    imported once per process; it is called as ``function(malformedRecordHandlerArgs, record)`` for
    each record dropped. ValueError names the option when it cannot be found."""
    found = _handlers.get(spec)
    if found is not None:
        return found
    if not _HANDLER.fullmatch(spec):
        raise ValueError(f"Invalid value '{spec}' for option 'malformedRecordHandler', must be package.module:function")
    module, _, name = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"Option 'malformedRecordHandler': cannot import {spec}: {exc}") from None
    if not callable(function):
        raise ValueError(f"Option 'malformedRecordHandler': {spec} is not a function")
    _handlers[spec] = function
    return function


@dataclass(frozen=True)
class ReaderSchema:
    """The schema a column is decoded to, resolved on the driver at load (picklable, hashable)."""

    field: str                                     # "key" or "value"
    registry_url: str
    subject: str
    version: int
    schema_id: int
    schema: str                                    # the registry's schema text
    dependencies: tuple[tuple[str, str], ...] = ()  # referenced schemas (name, text), dependencies first

    @property
    def option(self) -> str:
        return f"{self.field}AvroSubject"


def resolve_reader(field: str, registry_url: str, subject: str, version: str,
                   client: RegistryClient | None = None) -> ReaderSchema:
    """The subject's ``version`` (``latest`` or a number) as a :class:`ReaderSchema`, checked to
    be an Avro schema Spark can type. Errors are one sentence naming the option and the registry."""
    client = client or RegistryClient(registry_url)
    try:
        number, registered = client.subject_version(subject, version)
    except RegistryClientError as exc:
        raise AvroSchemaError(f"{field}AvroSubject: cannot read version {version} of subject {subject!r} from "
                              f"the schema registry at {client.url}: {exc}"
                              + (f" (error {exc.error_code})" if exc.error_code > 0 else "")) from None
    if registered.schema_type != "AVRO":
        raise AvroSchemaError(f"{field}AvroSubject: subject {subject!r} version {number} is a "
                              f"{registered.schema_type} schema, not AVRO")
    reader = ReaderSchema(field, registry_url, subject, number, registered.schema_id, registered.schema,
                          tuple(registered.dependencies))
    spark_type_of(reader)              # refuse what Spark cannot type now, at load
    return reader


# ------------------------------------------------------------------------------ schemas -> types


def _parse(schema: str, dependencies: Iterable[tuple[str, str]], plain_logical: bool) -> Any:
    named: dict[str, Any] = {}
    try:
        for _, text in dependencies:
            doc = json.loads(text)
            fastavro.parse_schema(_without_logical(doc) if plain_logical else doc, named_schemas=named)
        doc = json.loads(schema)
        return fastavro.parse_schema(_without_logical(doc) if plain_logical else doc, named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException,
            fastavro.schema.UnknownType) as exc:
        raise AvroSchemaError(f"invalid Avro schema: {exc}") from None


def _without_logical(doc: Any) -> Any:
    """The schema with date/time/timestamp/uuid logical types dropped (their plain Avro type stays)."""
    if isinstance(doc, list):
        return [_without_logical(d) for d in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: _without_logical(v) if k in ("type", "items", "values", "fields") else v for k, v in doc.items()}
    if out.get("logicalType") in _PLAIN_LOGICAL:
        del out["logicalType"]
    return out


def spark_type_of(reader: ReaderSchema) -> DataType:
    """The Spark type of a column decoded with ``reader`` (nullable everywhere, as Spark reads Avro)."""
    return _types(reader)[0]


def _types(reader: ReaderSchema) -> tuple[DataType, pa.DataType]:
    parsed = _parse(reader.schema, reader.dependencies, plain_logical=False)
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    try:
        return _convert(parsed, named, ())
    except AvroSchemaError as exc:
        raise AvroSchemaError(f"{reader.option}: subject {reader.subject!r} version {reader.version}: {exc}") \
            from None


def _convert(s: Any, named: dict[str, Any], path: tuple[str, ...]) -> tuple[DataType, pa.DataType]:
    """(Spark type, the Arrow type fastavro's plain values are built into before the final cast).
    ``path`` is the field path, with ``<record name>`` entries that detect recursion."""
    where = _where(path)
    if isinstance(s, str):
        if s in _PRIMITIVES:
            return _PRIMITIVES[s]
        if s == "null":
            raise AvroSchemaError(f"{where} is of type null, which Spark cannot hold outside a union")
        if s in named:
            if any(p == f"<{s}>" for p in path):
                raise AvroSchemaError(f"{where}: record {s} is recursive, which Spark cannot type")
            return _convert(named[s], named, path + (f"<{s}>",))
        raise AvroSchemaError(f"{where}: unknown type {s!r}")
    if isinstance(s, list):
        return _union(s, named, path)
    t = s.get("type")
    logical = s.get("logicalType")
    if t == "record":
        name = s.get("name", "")
        fields, builds = [], []
        for f in s.get("fields", []):
            spark_t, build_t = _convert(f["type"], named, path + (f"<{name}>", f["name"]))
            fields.append(StructField(f["name"], spark_t, True))
            builds.append(pa.field(f["name"], build_t))
        return StructType(fields), pa.struct(builds)
    if t == "enum":
        return StringType(), pa.string()
    if t == "array":
        item_s, item_b = _convert(s["items"], named, path + ("[]",))
        return ArrayType(item_s, True), pa.list_(item_b)
    if t == "map":
        value_s, value_b = _convert(s["values"], named, path + ("{}",))
        return MapType(StringType(), value_s, True), pa.map_(pa.string(), value_b)
    if logical == "decimal" and t in ("bytes", "fixed"):
        precision, scale = int(s.get("precision", 0)), int(s.get("scale", 0))
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise AvroSchemaError(f"{where}: decimal({precision}, {scale}) does not fit Spark's decimal (precision "
                                  "1-38, 0 <= scale <= precision)")
        return DecimalType(precision, scale), pa.decimal128(precision, scale)
    if t == "fixed":
        return BinaryType(), pa.binary()
    if t == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType(), pa.timestamp("ms" if logical == "timestamp-millis" else "us", tz="UTC")
    if t == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return TimestampNTZType(), pa.timestamp("ms" if logical == "local-timestamp-millis" else "us")
    if t == "int" and logical == "date":
        return DateType(), pa.date32()
    if isinstance(t, (str, list, dict)):
        return _convert(t, named, path)
    raise AvroSchemaError(f"{where}: cannot read type {json.dumps(s)[:80]}")


def _where(path: tuple[str, ...]) -> str:
    return ".".join(p for p in path if not p.startswith("<")) or "the schema"


def _union(members: list, named: dict[str, Any], path: tuple[str, ...]) -> tuple[DataType, pa.DataType]:
    branches = [m for m in members if m != "null"]
    if len(branches) == 1:
        return _convert(branches[0], named, path)
    if branches and set(branches) <= {"int", "long"}:
        return _PRIMITIVES["long"]
    if branches and set(branches) <= {"float", "double"}:
        return _PRIMITIVES["double"]
    where = _where(path)
    raise AvroSchemaError(f"{where}: union {json.dumps(members)[:100]} is not supported (only [null, T], "
                          "[int, long] and [float, double])")


# ------------------------------------------------------------------------------ decoding


class ColumnDecoder:
    """Decodes one column's framed Avro for one :class:`ReaderSchema`; ``lookup`` gives a writer
    schema by id (the registry in production, a dict in unit tests)."""

    def __init__(self, reader: ReaderSchema, lookup: Callable[[int], RegisteredSchema]) -> None:
        self.reader = reader
        self.lookup = lookup
        self.spark_type, self.build_type = _types(reader)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")
        self.reader_parsed = _parse(reader.schema, reader.dependencies, plain_logical=True)
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def writer(self, schema_id: int, topic: str, partition: int, offset: int) -> Any:
        """The parsed writer schema of ``schema_id`` (fetched once per process)."""
        with self._lock:
            parsed = self._writers.get(schema_id)
        if parsed is not None:
            return parsed
        if schema_id == self.reader.schema_id:
            parsed = self.reader_parsed
        else:
            try:
                registered = self.lookup(schema_id)
            except RegistryClientError as exc:
                if exc.error_code == SCHEMA_NOT_FOUND:
                    raise AvroDecodeError(
                        f"The {self.reader.field} of {topic}-{partition} at offset {offset} has schema id "
                        f"{schema_id}, which the schema registry at {self.reader.registry_url} does not know "
                        f"(error {SCHEMA_NOT_FOUND}: {exc})") from None
                raise AvroDecodeError(f"The {self.reader.field} of {topic}-{partition} at offset {offset}: cannot "
                                      f"fetch schema id {schema_id} from the schema registry at "
                                      f"{self.reader.registry_url}: {exc}") from None
            if registered.schema_type != "AVRO":
                raise AvroDecodeError(f"The {self.reader.field} of {topic}-{partition} at offset {offset} has "
                                      f"schema id {schema_id}, a {registered.schema_type} schema, not AVRO")
            try:
                parsed = _parse(registered.schema, registered.dependencies, plain_logical=True)
            except AvroSchemaError as exc:
                raise AvroDecodeError(f"schema id {schema_id} (the {self.reader.field} of {topic}-{partition} at "
                                      f"offset {offset}): {exc}") from None
        with self._lock:
            self._writers[schema_id] = parsed
        return parsed

    def decode(self, column: pa.Array, offsets: np.ndarray, topic: str, partition: int) -> pa.Array:
        """The typed column for a ``binary`` column of framed values; nulls stay null."""
        n = len(column)
        if n == 0:
            return pa.array([], self.arrow_type)
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        _, offsets_buf, data_buf = column.buffers()
        ends_all = np.frombuffer(offsets_buf, dtype=np.int32, count=n + 1, offset=column.offset * 4).astype(np.int64)
        data = data_buf.to_pybytes() if data_buf is not None else b""
        arr = np.frombuffer(data, dtype=np.uint8)
        starts, ends = ends_all[:-1], ends_all[1:]
        rows = np.flatnonzero(valid)
        short = rows[ends[rows] - starts[rows] < 5]
        if len(short):
            i = int(short[0])
            raise AvroDecodeError(f"The {self.reader.field} of {topic}-{partition} at offset {int(offsets[i])} is "
                                  f"{int(ends[i] - starts[i])} bytes, too short for registry-framed Avro (magic "
                                  "byte 0 and a 4-byte schema id)")
        heads = starts[rows]
        magic = arr[heads] if len(rows) else np.empty(0, np.uint8)
        if (magic != 0).any():
            i = int(rows[np.flatnonzero(magic != 0)[0]])
            raise AvroDecodeError(f"The {self.reader.field} of {topic}-{partition} at offset {int(offsets[i])} is "
                                  f"not registry-framed Avro: magic byte {int(arr[starts[i]])}, expected 0")
        ids = ((arr[heads + 1].astype(np.int64) << 24) | (arr[heads + 2].astype(np.int64) << 16)
               | (arr[heads + 3].astype(np.int64) << 8) | arr[heads + 4].astype(np.int64))
        out: list[Any] = [None] * n
        read = fastavro.schemaless_reader
        bytes_io = io.BytesIO
        for schema_id in np.unique(ids).tolist():
            group = rows[ids == schema_id]
            first = int(group[0])
            writer = self.writer(schema_id, topic, partition, int(offsets[first]))
            reader = None if schema_id == self.reader.schema_id else self.reader_parsed
            i = first
            try:
                # the per-record loop: one fastavro call per value, nothing else
                for i, a, b in zip(group.tolist(), (starts[group] + 5).tolist(), ends[group].tolist()):
                    out[i] = read(bytes_io(data[a:b]), writer, reader)
            except Exception as exc:  # noqa: BLE001 - fastavro raises many types; each becomes one message
                raise AvroDecodeError(
                    f"The {self.reader.field} of {topic}-{partition} at offset {int(offsets[i])} (schema id "
                    f"{schema_id}) cannot be decoded to {self.reader.subject} version {self.reader.version} "
                    f"(schema id {self.reader.schema_id}): {type(exc).__name__}: {exc}") from None
        try:
            built = pa.array(out, type=self.build_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise AvroDecodeError(f"The {self.reader.field}s of {topic}-{partition} at offsets "
                                  f"{int(offsets[0])}-{int(offsets[-1])} do not fit {self.spark_type.simpleString()}: "
                                  f"{exc}") from None
        return built if built.type == self.arrow_type else built.cast(self.arrow_type)


_decoders: dict[ReaderSchema, ColumnDecoder] = {}
_decoders_pid = os.getpid()
_decoders_lock = threading.Lock()


def cached_decoder(reader: ReaderSchema) -> ColumnDecoder:
    """One decoder per process and reader schema: a Python worker reused across Spark tasks
    fetches each writer schema once."""
    global _decoders_pid
    with _decoders_lock:
        if _decoders_pid != os.getpid():
            _decoders.clear()
            _decoders_pid = os.getpid()
        decoder = _decoders.get(reader)
        if decoder is None:
            client = RegistryClient(reader.registry_url)
            decoder = _decoders[reader] = ColumnDecoder(reader, client.by_id)
        return decoder


def decode_columns(batch: pa.RecordBatch, readers: Iterable[ReaderSchema], schema: pa.Schema, topic: str,
                   partition: int, drop_malformed: bool = False,
                   on_malformed: Callable[[MalformedRecord], None] | None = None) -> pa.RecordBatch:
    """``batch`` (Spark's Kafka schema) with its key and/or value column decoded, as ``schema``;
    with ``drop_malformed`` (``mode=DROPMALFORMED``) the records that cannot be decoded are left
    out, each logged and given to ``on_malformed`` (a batch holding one is decoded again record by
    record to find them). A failing ``on_malformed`` is logged; the read goes on."""
    readers = tuple(readers)
    try:
        return _decode_columns(batch, readers, schema, topic, partition)
    except AvroDecodeError:
        if not drop_malformed:
            raise
    keep = np.ones(batch.num_rows, dtype=bool)
    for i in range(batch.num_rows):
        try:
            _decode_columns(batch.slice(i, 1), readers, schema, topic, partition)
        except AvroDecodeError as exc:
            keep[i] = False
            log.error("Dropped a malformed record (mode DROPMALFORMED): %s", exc)
            if on_malformed is not None:
                _report(on_malformed, batch, i, exc, topic, partition)
    return _decode_columns(batch.filter(pa.array(keep)), readers, schema, topic, partition)


def _report(on_malformed: Callable[[MalformedRecord], None], batch: pa.RecordBatch, row: int,
            exc: AvroDecodeError, topic: str, partition: int) -> None:
    field = exc.field or "value"
    data = batch.column(batch.schema.get_field_index(field))[row].as_py()
    offset = batch.column(batch.schema.get_field_index("offset"))[row].as_py()
    try:
        on_malformed(MalformedRecord(topic, partition, int(offset), field, data, str(exc)))
    except Exception:  # noqa: BLE001 - the handler is the application's: its failure is not the read's
        log.exception("malformedRecordHandler failed for %s-%d at offset %d", topic, partition, offset)


def _decode_columns(batch: pa.RecordBatch, readers: Iterable[ReaderSchema], schema: pa.Schema, topic: str,
                    partition: int) -> pa.RecordBatch:
    columns = list(batch.columns)
    offsets = batch.column(batch.schema.get_field_index("offset")).to_numpy()
    for reader in readers:
        i = batch.schema.get_field_index(reader.field)
        try:
            columns[i] = cached_decoder(reader).decode(batch.column(i), offsets, topic, partition)
        except AvroDecodeError as exc:
            exc.field = reader.field
            raise
    return pa.RecordBatch.from_arrays(columns, schema=schema)
