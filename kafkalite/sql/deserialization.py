"""ksqlDB's deserialization errors: a record whose key or value its format cannot read is a
*poison* record. ksqlDB skips it, writes a ``DESERIALIZATION_ERROR`` message to its processing
log (the ``processing`` logger; ``ProcessingLogMessageSchema``: ``type`` 0 and a
``deserializationError`` with ``target``, ``errorMessage``, ``recordB64``, ``cause``, ``topic``)
and goes on; with ``ksql.fail.on.deserialization.error=true`` the query fails instead.

Here the check of each record is Spark SQL (:func:`error_sql`, :func:`avro_key_error_sql`: the
cause as text, null for a record that reads); the query keeps the records whose cause is null
(:func:`skip_or_fail`) through an Arrow function on the executors, which costs a good batch one
vectorised null check and logs each poison record (its cause, target, partition, offset and, for
a poison record only, its bytes). ``recordB64`` holds the record only with
``ksql.logging.processing.rows.include=true``, as ksqlDB keeps record data out of its log by
default. AVRO values are read by the kafkalite source itself: with its ``mode=DROPMALFORMED`` it
drops and logs (its own logger, with topic, partition, offset and cause) what it cannot decode.
An AVRO key is decoded by :mod:`kafkalite.sql.avro_keys`'s lenient function (null when it
cannot), checked here.

With ``ksql.logging.processing.topic.auto.create=true`` each message is also produced to the
processing-log topic (:mod:`kafkalite.sql.processing_log`): the Arrow function carries the topic
to the executors' Python workers, which attach the Kafka appender on first use and flush it after
each batch that logged something.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from typing import Any, Callable, Sequence

from kafkalite.sql import ast, processing_log
from kafkalite.sql.translate import spark_type, wire_type

#: ksqlDB's processing logger for a source's deserializer (its log4j name, under ``processing``)
LOGGER = "processing.KsqlTopic.Source.deserializer"
log = logging.getLogger(LOGGER)
#: ProcessingLogMessageSchema.MessageType.DESERIALIZATION_ERROR
DESERIALIZATION_ERROR = 0
#: Kafka's deserializers' words for a record of the wrong size (KAFKA format)
_SIZE = {"INT": ("IntegerDeserializer", 4), "BIGINT": ("LongDeserializer", 8), "DOUBLE": ("Deserializer", 8)}


def message(target: str, topic: str, cause: str, record: bytes | None, include_rows: bool,
            partition: int | None = None, offset: int | None = None) -> dict[str, Any]:
    """The processing log message ksqlDB writes for a deserialization error (with the record's
    partition and offset added where known: ksqlDB's message has no field for them)."""
    error: dict[str, Any] = {
        "target": target,
        "errorMessage": f"Failed to deserialize {target} from topic: {topic}. {cause}",
        "recordB64": base64.b64encode(record).decode() if include_rows and record is not None else None,
        "cause": [cause],
        "topic": topic,
    }
    if partition is not None:
        error["partition"] = partition
    if offset is not None:
        error["offset"] = offset
    return {"type": DESERIALIZATION_ERROR, "deserializationError": error, "recordProcessingError": None,
            "productionError": None}


def log_error(target: str, topic: str, cause: str, record: bytes | None, include_rows: bool,
              partition: int | None = None, offset: int | None = None) -> None:
    """One poison record, logged as ksqlDB's processing log writes it (a JSON message, ERROR; the
    message itself on the record too, for the processing log's Kafka appender)."""
    _configure()
    entry = message(target, topic, cause, record, include_rows, partition, offset)
    log.error(json.dumps(entry), extra={processing_log.STRUCTURED: entry})


def _configure() -> None:
    """On a Spark executor's Python worker nothing configures ``logging``: give the processing
    logger a stderr handler there (its stderr is the executor's, the server's own in local mode),
    so the error is not lost to Python's last-resort handler."""
    root = logging.getLogger()
    if not root.handlers and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def type_name(t: ast.SqlType) -> str:
    return {"INT": "INTEGER", "VARCHAR": "STRING"}.get(t.name, t.name)


# -- the checks, in Spark SQL -------------------------------------------------------------------
def kafka_error_sql(raw: str, t: ast.SqlType) -> str | None:
    """KAFKA: a binary INT/BIGINT/DOUBLE of the wrong size, in Kafka's deserializers' words."""
    if t.name not in _SIZE:
        return None
    name, width = _SIZE[t.name]
    return f"CASE WHEN length({raw}) != {width} THEN 'Size of data received by {name} is not {width}' END"


def json_error_sql(raw: str, unwrapped: bool) -> str:
    """JSON: a record that is not JSON at all (an unwrapped key: not one JSON value; otherwise not
    a JSON object); a JSON ``null`` is a null row, not an error."""
    text = f"trim(CAST({raw} AS STRING))"
    if unwrapped:
        parsed = f"from_json(concat('[', {text}, ']'), 'ARRAY<STRING>')"
        bad = f"({parsed} IS NULL OR size({parsed}) != 1)"
    else:
        bad = f"({text} != 'null' AND json_object_keys({text}) IS NULL)"     # keys only: no values built
    return f"CASE WHEN {bad} THEN concat('Invalid JSON: ', substring({text}, 1, 100)) END"


def delimited_fields_sql(raw: str, delimiter: str) -> str:
    """The fields of a DELIMITED record (every one, trailing empty ones too)."""
    delim = re.escape(delimiter).replace("\\", "\\\\").replace("'", "\\'")
    return f"split(CAST({raw} AS STRING), '{delim}', -1)"


def delimited_field_sql(fields: str, i: int, t: ast.SqlType) -> str:
    """Field ``i`` read as the column's wire type: an empty field is null (as ksqlDB reads it),
    text that is no such value is null too (and the record an error: :func:`delimited_error_sql`)."""
    return f"try_cast(nullif(try_element_at({fields}, {i + 1}), '') AS {spark_type(wire_type(t))})"


def delimited_error_sql(raw: str, delimiter: str, columns: Sequence[ast.ColumnDef]) -> str:
    """DELIMITED: a record with another number of fields than columns, or a field its column's
    type cannot read (ksqlDB's ``KsqlDelimitedDeserializer`` fails both)."""
    fields = delimited_fields_sql(raw, delimiter)
    count = (f"WHEN size({fields}) != {len(columns)} THEN concat('Column count mismatch on deserialization. "
             f"expected: {len(columns)}, got: ', size({fields}))")
    checks = [count]
    for i, c in enumerate(columns):
        text = f"nullif(try_element_at({fields}, {i + 1}), '')"
        checks.append(f"WHEN {text} IS NOT NULL AND {delimited_field_sql(fields, i, c.type)} IS NULL THEN "
                      f"concat('Failed to parse ', {text}, ' as {type_name(c.type)} for column {c.name}')")
    return "CASE " + " ".join(checks) + " END"


def avro_key_error_sql(raw: str, undecoded: str) -> str:
    """AVRO keys: a key that the lenient decoder could not read (the boolean column ``undecoded``,
    which it sets), in the words of Confluent's deserializer (not framed: ``Unknown magic byte!``;
    else the id)."""
    schema_id = f"conv(hex(substring({raw}, 2, 4)), 16, 10)"
    return (f"CASE WHEN {undecoded} THEN CASE WHEN length({raw}) < 5 OR substring({raw}, 1, 1) "
            f"!= X'00' THEN 'Unknown magic byte!' ELSE concat('Error deserializing Avro message for id ', "
            f"{schema_id}) END END")


def error_sql(raw: str, fmt: str, columns: Sequence[ast.ColumnDef], delimiter: str = ",",
              unwrapped: bool = False) -> str | None:
    """The cause of a key (``raw`` = ``key``) or value that ``fmt`` cannot read, null if it reads
    (or is null); None for a format checked elsewhere (AVRO) or with nothing to check."""
    if not columns:
        return None
    if fmt == "KAFKA" and len(columns) == 1:
        check = kafka_error_sql(raw, columns[0].type)
    elif fmt == "JSON":
        check = json_error_sql(raw, unwrapped)
    elif fmt == "DELIMITED":
        check = delimited_error_sql(raw, delimiter, columns)
    else:
        return None
    return None if check is None else f"CASE WHEN {raw} IS NOT NULL THEN {check} END"


# -- skipping (or failing) in the query --------------------------------------------------------
def skip_or_fail(frame: Any, topic: str, fail: bool, include_rows: bool,
                 log_topic: processing_log.ProcessingLogTopic | None = None) -> Any:
    """``frame`` (with ``__deser_error``, ``__deser_target``, ``__deser_record``, ROWPARTITION and
    ROWOFFSET) without its poison records, each logged (and produced to ``log_topic`` if given);
    with ``fail`` the query fails on the first one instead, as ksqlDB's does with
    ``ksql.fail.on.deserialization.error=true``."""
    if fail:
        kept = frame.where("`__deser_error` IS NULL OR raise_error(concat('Failed to deserialize ', "
                           f"`__deser_target`, ' from topic: ', {_sql_text(topic)}, '. ', `__deser_error`)) IS NULL")
    else:
        from pyspark.sql.functions import arrow_udf
        from pyspark.sql.types import BooleanType

        # one function per topic and setting, registered on the frame's session (as avro_keys' are);
        # an Arrow function: the good records cost one vectorised null check per batch, no Python each
        name = "ksql_processing_log_" + hashlib.sha1(f"{topic}\0{include_rows}\0{log_topic}".encode()).hexdigest()[:16]
        # (pyspark's stubs list only the forms with a functionType, which Spark 4 deprecates for hints)
        logger = _arrow_function(_Logger(topic, include_rows, log_topic))
        function = arrow_udf(logger, BooleanType())  # type: ignore[call-overload]
        frame.sparkSession.udf.register(name, function)
        # a good record's bytes and target go to Python as nulls: only a poison record's are read
        def if_bad(column: str) -> str:
            return f"CASE WHEN `__deser_error` IS NOT NULL THEN {column} END"
        kept = frame.where(f"{name}(`__deser_error`, {if_bad('`__deser_target`')}, `ROWPARTITION`, `ROWOFFSET`, "
                           f"{if_bad('`__deser_record`')})")
    return kept.drop("__deser_error", "__deser_target", "__deser_record")


def _arrow_function(logger: "_Logger") -> Callable[[Any, Any, Any, Any, Any], Any]:
    """``logger`` as a function whose type hints say arrays to array, as Spark's Arrow UDFs want."""
    import pyarrow as pa

    def log_batch(cause: Any, target: Any, partition: Any, offset: Any, record: Any) -> Any:
        return logger(cause, target, partition, offset, record)
    log_batch.__annotations__ = {**{n: pa.Array for n in ("cause", "target", "partition", "offset", "record")},
                                 "return": pa.Array}
    return log_batch


class _Logger:
    """The executors' side of :func:`skip_or_fail`, on Arrow arrays of a batch of records: true
    for each record that reads; each other one is logged and false."""

    def __init__(self, topic: str, include_rows: bool,
                 log_topic: processing_log.ProcessingLogTopic | None = None) -> None:
        self.topic, self.include_rows, self.log_topic = topic, include_rows, log_topic

    def __call__(self, cause: Any, target: Any, partition: Any, offset: Any, record: Any) -> Any:
        import pyarrow.compute as pc

        if cause.null_count == len(cause):           # the usual batch: every record reads
            return pc.is_null(cause)
        if self.log_topic is not None:               # this worker's appender, made once per process
            processing_log.attach(self.log_topic)
        for i in pc.indices_nonzero(pc.is_valid(cause)).to_pylist():
            data = record[i].as_py()
            log_error(target[i].as_py() or "value", self.topic, cause[i].as_py(), data, self.include_rows,
                      partition[i].as_py(), offset[i].as_py())
        if self.log_topic is not None:
            processing_log.flush()                   # written before the batch goes on (a worker may exit)
        return pc.is_null(cause)
