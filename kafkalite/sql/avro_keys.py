"""ksqlDB's AVRO key format (``KEY_FORMAT='AVRO'``, or ``FORMAT='AVRO'``): keys framed as the
schema registry's Avro (magic byte 0, 4-byte schema id, Avro binary) under the ``<topic>-key``
subject, as ksqlDB's ``KsqlAvroSerdeFactory`` writes them through Confluent's ``AvroConverter``.

What ksqlDB does, and so this module:

- A single key column is *unwrapped* (``SerdeFeature.UNWRAP_SINGLES``, which ksqlDB always sets
  for one key column): the key is the column's own Avro type, a primitive (``"string"``,
  ``"long"``...) not in a union, or for a STRUCT column a record named after the source
  (``AvroFormat.getKeySchemaName``: ``io.confluent.ksql.avro_schemas.<UpperCamel name>Key``).
  Several key columns are wrapped in that record, one optional field per column.
- ``CREATE STREAM|TABLE`` without key columns infers them from the subject's latest schema
  (``DefaultSchemaInjector``, always unwrapped): one column, ``ROWKEY``, of the schema's type;
  with declared key columns, their schema is registered as ``<topic>-key`` before the statement
  is logged (``SchemaRegisterInjector``), unless the subject exists.
- A windowed key is the Avro key's bytes followed by Kafka Streams' window bytes
  (``TimeWindowedSerializer``: start; ``SessionWindowedSerializer``: end, start): ``windowed``
  splits them off first, so the Avro part is decoded as any other key.

Pure functions for the schemas, the Python encoding (INSERT VALUES) and decoding (PRINT, tables
read back into a state store), and the two Spark SQL functions the engine's queries call to read
and write such keys (:func:`read`, :func:`write_sql`): Python UDFs registered on the session,
each holding the schema resolved on the driver (the subject's latest version when the query is
planned), so executors ask the registry only for writer schemas they have not seen.
"""
from __future__ import annotations

import datetime
import io
import json
import threading
from typing import TYPE_CHECKING, Any, Sequence

from kafkalite.sql import ast, serde
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.translate import quote, spark_type

if TYPE_CHECKING:
    from kafkalite.registry.client import RegisteredSchema
    from kafkalite.sql.metastore import DataSource

#: the name ksqlDB gives the column of an inferred (unwrapped) key
ROWKEY = "ROWKEY"
_SR_DOC = "https://docs.confluent.io/platform/current/schema-registry/serdes-develop/index.html"
_NO_REGISTRY = "Schema registry url is not set (ksql.schema.registry.url)"


def subject(topic: str) -> str:
    """The registry subject of a topic's keys (``KsqlConstants.getSRSubject``)."""
    return f"{topic}-key"


def key_record_name(source_name: str) -> str:
    """ksqlDB's ``AvroFormat.getKeySchemaName`` without the namespace: the source's name from
    UPPER_UNDERSCORE to UpperCamel, plus ``Key`` (``FOO_BAR`` -> ``FooBarKey``)."""
    return "".join(part[:1].upper() + part[1:].lower() for part in source_name.split("_")) + "Key"


def key_schema(source_name: str, keys: Sequence[ast.ColumnDef], full_name: str | None = None) -> str:
    """The Avro schema ksqlDB registers for a source's key columns (``<topic>-key``): one column
    unwrapped (its plain Avro type; a STRUCT a record named ``<Name>Key``), several wrapped in that
    record with optional fields; ``full_name`` (``KEY_SCHEMA_FULL_NAME``) names the record instead.
    ValueError names a type Avro cannot carry."""
    namespace, name = serde.split_full_name(full_name or f"{serde.AVRO_NAMESPACE}.{key_record_name(source_name)}")
    if len(keys) == 1 and keys[0].type.name != "STRUCT":
        return json.dumps(serde.avro_type(keys[0].type, name))
    fields = keys[0].type.fields if len(keys) == 1 else tuple((k.name, k.type) for k in keys)
    return json.dumps({"type": "record", "name": name, **({"namespace": namespace} if namespace else {}),
                       "fields": [serde.avro_field(n, t, name) for n, t in fields]})


def inferred_columns(topic: str, registered: "RegisteredSchema") -> tuple[ast.ColumnDef, ...]:
    """The key column ksqlDB infers from ``<topic>-key``'s schema (unwrapped: ``ROWKEY`` of the
    schema's type); KsqlError in ksqlDB's words for a schema that is not Avro or has no type."""
    if registered.schema_type != "AVRO":
        raise KsqlError(f"Key schema is not in the expected format. You may want to set KEY_FORMAT to "
                        f"'{registered.schema_type}'.\ntopic: {topic}\nexpected format: AVRO\n"
                        f"actual format from Schema Registry: {registered.schema_type}")
    t = serde.avro_sql_type(json.loads(registered.schema))
    if t is None:
        raise KsqlError(f"Unable to verify if the key schema for topic: {topic} is compatible with ksqlDB.\n"
                        f"Reason: the Avro type has no ksqlDB column type\n\nPlease see "
                        "https://github.com/confluentinc/ksql/issues/ to see if this particular reason is already "
                        f"known.\nIf not, please log a new issue, including this full error message.\n"
                        f"Schema:{registered.schema}")
    refused = serde.key_refusal([ast.ColumnDef(ROWKEY, t, key=True)])
    if refused is not None:
        raise KsqlError(refused)
    return (ast.ColumnDef(ROWKEY, t, key=True),)


def missing_subject(topic: str) -> str:
    """ksqlDB's message for a key subject the registry does not have."""
    return (f"Schema for message keys on topic '{topic}' does not exist in the Schema Registry.\n"
            f"Subject: {subject(topic)}\nPossible causes include:\n- The topic itself does not exist\n"
            "\t-> Use SHOW TOPICS; to check\n- Messages on the topic are not serialized using a format Schema "
            f"Registry supports\n\t-> Use PRINT '{topic}' FROM BEGINNING; to verify\n- Messages on the topic have "
            "not been serialized using a Confluent Schema Registry supported serializer\n"
            f"\t-> See {_SR_DOC}\n- The schema is registered on a different instance of the Schema Registry\n"
            "\t-> Use the REST API to list available subjects\t"
            "https://docs.confluent.io/platform/current/schema-registry/develop/api.html#get--subjects\n"
            "- You do not have permissions to access the Schema Registry.\n"
            "\t-> See https://docs.confluent.io/platform/current/schema-registry/security/index.html")


# -- Python: INSERT VALUES, PRINT, tables read back -------------------------------------------
def encode(source: "DataSource", row: dict[str, Any], avro: serde.AvroLookup) -> bytes | None:
    """A row's key as registry-framed Avro with the latest ``<topic>-key`` schema; a single key
    column that is null is a null key. ValueError for a value the schema cannot take."""
    from kafkalite.registry import serde as framing

    keys = source.key_columns
    schema_id, parsed, _ = avro(subject(source.topic))
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    if len(keys) == 1:
        if row.get(keys[0].name) is None:
            return None
        datum = serde.avro_value(row[keys[0].name], keys[0].type, parsed, named, keys[0].name)
    else:
        fields = {f["name"].upper(): f for f in (parsed.get("fields", []) if isinstance(parsed, dict) else [])}
        datum = {}
        for k in keys:
            f = fields.get(k.name, {"name": k.name, "type": None})
            datum[f["name"]] = serde.avro_value(row.get(k.name), k.type, f["type"], named, k.name)
    try:
        return framing.encode(schema_id, parsed, datum)
    except framing.SerdeError as exc:
        raise ValueError(str(exc)) from None


def columns_of(datum: Any, keys: Sequence[str]) -> dict[str, Any]:
    """A decoded key as its columns: an unwrapped key is the one column's value; a record's
    fields match the key columns as ksqlDB matches them (:func:`serde.record_fields`)."""
    if len(keys) == 1:
        return {keys[0]: datum}
    return serde.record_fields(datum, keys) if isinstance(datum, dict) else dict.fromkeys(keys)


#: the column a lenient read adds: true where a key is there but could not be decoded (a poison key)
UNDECODED = "__avro_key_undecoded"


#: the column :func:`read` decodes a record's key into, once per record (a struct for a key record)
DECODED = "__avro_key_decoded"


# -- Spark SQL: the queries' reads and writes -------------------------------------------------
def read(frame: Any, spark: Any, registry_url: str, topic: str, keys: Sequence[ast.ColumnDef], raw: str = "key",
         lenient: bool = False, version: str = "latest") -> tuple[Any, list[str]]:
    """``frame`` with its key decoded into :data:`DECODED`, and the Spark SQL of the key columns
    read from it (each cast to its declared type): ``raw`` holds registry-framed Avro bytes (a
    windowed key without its window), decoded by a function registered on the session with
    ``<topic>-key``'s latest schema (or the ``version`` a KEY_SCHEMA_ID names). ``lenient``: a
    key that cannot be decoded is null, and the :data:`UNDECODED` column says so (the query skips
    and logs it: ``deserialization``) instead of failing the query.

    The function is one projection of its own, registered as nondeterministic, so that Spark calls
    it once per record. As a deterministic function, the several expressions that read it (each key
    column, the flag) share one call within a projection, but the optimizer pushes the engine's
    poison-record filter, which reads the flag, below the key columns' projection with the call
    substituted in: the key was decoded twice, once for the filter and once for the columns
    (tests/spark/test_spark_sql_format_matrix.py's plan check). A nondeterministic projection is
    neither merged into the next one nor passed by a filter."""
    from pyspark.sql.functions import udf

    from spark_integration.avro import AvroSchemaError, resolve_reader, spark_type_of

    if not registry_url:
        raise KsqlError(_NO_REGISTRY)
    try:
        reader = resolve_reader("key", registry_url, subject(topic), version)
    except AvroSchemaError as exc:
        raise KsqlError(str(exc)) from None
    decoded = f"`{DECODED}`"
    if len(keys) == 1:
        cols = [f"CAST({decoded} AS {spark_type(keys[0].type)}) AS {quote(keys[0].name)}"]
    else:
        doc = json.loads(reader.schema)
        fields = {str(f["name"]).upper(): str(f["name"])
                  for f in (doc.get("fields", []) if isinstance(doc, dict) else [])}
        missing = [k.name for k in keys if k.name not in fields]
        if missing:
            raise KsqlError(f"The key schema of {subject(topic)} has no field for the key column(s) "
                            f"{', '.join(missing)}")
        cols = [f"CAST({decoded}.{quote(fields[k.name])} AS {spark_type(k.type)}) AS {quote(k.name)}" for k in keys]
    # lenient: whether the key could not be decoded, as its own column; the key columns cannot say
    # it, since a key record whose fields are all null is a key like any other
    if lenient:
        cols.append(f"{raw} IS NOT NULL AND {decoded} IS NULL AS `{UNDECODED}`")
    name = f"ksql_avro_key_read_{reader.schema_id}" + ("_lenient" if lenient else "")
    decoder = _Decoder(registry_url, reader.schema_id, reader.schema, reader.dependencies, lenient)
    spark.udf.register(name, udf(decoder, spark_type_of(reader), useArrow=False).asNondeterministic())
    return frame.selectExpr("*", f"{name}({raw}) AS {decoded}"), cols


def write_sql(spark: Any, registry_url: str, sink: "DataSource", names: Sequence[str]) -> str:
    """Spark SQL of the key bytes of a query's output: its key columns registered as the
    ``<topic>-key`` schema ksqlDB would register (:func:`key_schema`), then encoded with it by a
    function registered on the session."""
    from kafkalite.registry.client import RegistryClient, RegistryClientError

    if not registry_url:
        raise KsqlError(_NO_REGISTRY, statement=sink.statement)
    keys = [sink.column(n) or ast.ColumnDef(n, ast.SqlType("STRING"), key=True) for n in names]
    try:
        if sink.key_schema_id is not None:                # KEY_SCHEMA_ID: that schema, as it is
            schema_id, schema = sink.key_schema_id, RegistryClient(registry_url).by_id(sink.key_schema_id).schema
        else:
            schema = key_schema(sink.name, keys, sink.key_schema_full_name)
            schema_id = RegistryClient(registry_url).register(subject(sink.topic), schema)
    except (ValueError, RegistryClientError) as exc:
        raise KsqlError(f"Could not register schema for topic: {exc}", statement=sink.statement) from None
    name = f"ksql_avro_key_write_{schema_id}"
    from pyspark.sql.types import BinaryType

    spark.udf.register(name, _Encoder(schema_id, schema), BinaryType())
    if len(keys) == 1:
        return f"{name}({quote(keys[0].name)})"
    return f"{name}(named_struct(" + ", ".join(f"'{k.name}', {quote(k.name)}" for k in keys) + "))"


class _Decoder:
    """The read function's body on an executor (pickled with the reader schema): framed Avro
    bytes to the reader schema's value, writer schemas fetched once per process and id."""

    def __init__(self, registry_url: str, schema_id: int, schema: str, dependencies: tuple[tuple[str, str], ...],
                 lenient: bool = False):
        self.registry_url, self.schema_id, self.schema, self.dependencies = registry_url, schema_id, schema, dependencies
        self.lenient = lenient

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if not self.lenient:
            return self._decode(data)
        try:
            return self._decode(data)
        except Exception:  # noqa: BLE001 - framing, registry and fastavro errors alike: a poison key
            return None

    def _decode(self, data: bytes) -> Any:
        import fastavro

        from kafkalite.registry import serde as framing

        data = bytes(data)
        writer_id = framing.schema_id_of(data)
        reader = _parsed(self.registry_url, self.schema_id, self.schema, self.dependencies)
        writer = reader if writer_id == self.schema_id else _parsed(self.registry_url, writer_id)
        return _as_spark(fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, reader))


class _Encoder:
    """The write function's body on an executor: a key value (a Row for a record) as framed Avro."""

    def __init__(self, schema_id: int, schema: str) -> None:
        self.schema_id, self.schema = schema_id, schema

    def __call__(self, value: Any) -> bytes | None:
        if value is None:
            return None
        from kafkalite.registry import serde as framing

        parsed = _parsed("", self.schema_id, self.schema, ())
        return framing.encode(self.schema_id, parsed, _datum(value))


_schemas: dict[tuple[str, int], Any] = {}
_schemas_lock = threading.Lock()


def _parsed(registry_url: str, schema_id: int, schema: str | None = None,
            dependencies: tuple[tuple[str, str], ...] = ()) -> Any:
    """A parsed schema by id, once per process (ids never change meaning); one not given is
    fetched from the registry."""
    from kafkalite.registry.serde import parse_avro

    with _schemas_lock:
        found = _schemas.get((registry_url, schema_id))
    if found is not None:
        return found
    if schema is None:
        from kafkalite.registry.client import RegistryClient

        registered = RegistryClient(registry_url).by_id(schema_id)
        schema, dependencies = registered.schema, tuple(registered.dependencies)
    parsed = parse_avro(schema, dependencies)
    with _schemas_lock:
        _schemas[(registry_url, schema_id)] = parsed
    return parsed


def _as_spark(v: Any) -> Any:
    """A decoded value as Spark takes it from a Python function: a TIME (Avro ``time-millis``)
    as milliseconds of the day, as the query's columns hold it."""
    if isinstance(v, datetime.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
    if isinstance(v, list):
        return [_as_spark(x) for x in v]
    if isinstance(v, dict):
        return {k: _as_spark(x) for k, x in v.items()}
    return v


def _datum(v: Any) -> Any:
    """A Spark value (a Row for a struct) as fastavro takes it; a TIMESTAMP, which Spark hands
    over as a naive local time, made aware (fastavro would take a naive one for UTC)."""
    if isinstance(v, datetime.datetime) and v.tzinfo is None:
        return v.astimezone()
    if hasattr(v, "asDict"):
        return {k: _datum(x) for k, x in v.asDict().items()}
    if isinstance(v, list):
        return [_datum(x) for x in v]
    if isinstance(v, dict):
        return {k: _datum(x) for k, x in v.items()}
    return v

