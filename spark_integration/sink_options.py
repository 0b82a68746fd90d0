"""The ``kafkalite`` sink's options and input columns, checked as Spark's Kafka sink checks them.

Pure: nothing here talks to a broker, so every rule is unit-tested with plain dicts and Spark
types. What Spark's ``KafkaWriter.validateQuery`` and ``KafkaSourceProvider`` say carries over:
the ``topic`` option overrides a ``topic`` column, ``value`` is required, ``key``/``value`` are
``string`` or ``binary``, ``headers`` is ``array<struct<key:string,value:binary>>``,
``partition`` is ``int``; every ``kafka.*`` option is a producer setting with the prefix
stripped, and the serializers are fixed. kafkalite adds an optional ``timestamp`` column
(``timestamp``, or ``bigint`` epoch milliseconds; Spark's Kafka *source* has that column, so a
read-then-write keeps each record's event time) written as the record's CreateTime; a null
timestamp is "now", as a Kafka producer without one. Two settings are kafkalite's own:

* ``deliveryGuarantee``: ``at_least_once`` (default; an idempotent producer, so retries never
  duplicate within a task) or ``exactly_once`` (each task's share of a micro-batch in one
  transaction, recognised when Spark runs the batch again: :mod:`spark_integration.sink`);
* ``transactionalIdPrefix``: the transactional ids' prefix in ``exactly_once`` mode, by default
  derived from the streaming query's id (kept in its checkpoint, so a restart finds its own);
* ``batchId``: in a ``foreachBatch`` function, the micro-batch's id, so that a batch write there
  is recognised when Spark runs the batch again, as a streaming write is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql.types import (ArrayType, BinaryType, DataType, IntegerType, LongType, StringType, StructType,
                               TimestampType)

from kafkalite.client.security import PLAINTEXT, ClientSecurity
from spark_integration.options import AvroSubject, _avro_options, _positive_int, security_from_options

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"

#: the topic-partition whose per-group committed offset records the last batch a task wrote
COMMIT_TOPIC = "_kafkalite-sink-commits"

_REJECTED = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with "
                            "ByteArraySerializer.",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported as values are serialized with "
                              "ByteArraySerializer.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
    "kafka.transactional.id": "Kafka option 'transactional.id' is not supported: use "
                              "deliveryGuarantee=exactly_once (and transactionalIdPrefix) instead.",
}

_HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


@dataclass(frozen=True)
class SinkOptions:
    """Everything a writer task needs; pickled from the driver to the executors."""

    bootstrap_servers: str
    topic: str | None                         # the ``topic`` option (overrides the column)
    columns: tuple[tuple[str, int], ...]      # (key|value|topic|headers|partition|timestamp, index in the row)
    guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None
    batch_id: int | None = None               # ``batchId``: a foreachBatch writer's micro-batch id
    commit_topic: str = COMMIT_TOPIC
    acks: str = "all"
    linger_ms: int = 5
    batch_size: int = 1 << 20
    compression_type: str = "none"
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    max_request_size: int = 1048576
    transaction_timeout_ms: int = 60000
    client_id: str = "kafkalite-spark-sink"
    security: ClientSecurity = PLAINTEXT
    schema_registry_url: str | None = None
    key_avro: AvroSubject | None = None
    value_avro: AvroSubject | None = None

    def index(self, column: str) -> int | None:
        return dict(self.columns).get(column)


def parse_sink_options(options: Mapping[str, Any], schema: StructType) -> SinkOptions:
    """Validate the options and the input columns; a problem is a ValueError in Spark's words."""
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    for key, message in _REJECTED.items():
        if key in opts:
            raise ValueError(message)
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    registry_url, key_avro, value_avro = _avro_options(opts)
    columns = _check_columns(schema, opts.get("topic", "").strip() or None,
                             avro={a.field for a in (key_avro, value_avro) if a is not None})

    guarantee = opts.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower().replace("-", "_")
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ValueError(f"Invalid value '{opts['deliveryguarantee']}' for option 'deliveryGuarantee', "
                         f"must be '{AT_LEAST_ONCE}' or '{EXACTLY_ONCE}'")
    prefix = opts.get("transactionalidprefix", "").strip() or None
    if prefix is not None and guarantee != EXACTLY_ONCE:
        raise ValueError("Option 'transactionalIdPrefix' needs deliveryGuarantee=exactly_once")
    batch_text = opts.get("batchid", "").strip()
    if batch_text and (not batch_text.isdigit() or guarantee != EXACTLY_ONCE or prefix is None):
        raise ValueError("Option 'batchId' must be a non-negative number, with deliveryGuarantee=exactly_once and "
                         "transactionalIdPrefix (the id of a foreachBatch micro-batch)")
    acks = opts.get("kafka.acks", "all").strip().lower()
    if acks not in ("all", "-1", "0", "1"):
        raise ValueError(f"Invalid value '{opts['kafka.acks']}' for option 'kafka.acks', must be all, -1, 0 or 1")
    if acks not in ("all", "-1") and (guarantee == EXACTLY_ONCE
                                      or opts.get("kafka.enable.idempotence", "true").lower() != "false"):
        raise ValueError(f"kafka.acks={acks} needs an idempotence-free producer: set kafka.enable.idempotence=false "
                         "(at_least_once only; exactly_once always writes with acks=all)")
    compression = opts.get("kafka.compression.type", "none").strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ValueError(f"Invalid value '{opts['kafka.compression.type']}' for option 'kafka.compression.type', "
                         "must be none, gzip, snappy, lz4 or zstd")

    def number(key: str, default: int) -> int:
        value = _positive_int(opts, key, key)
        return default if value is None else value

    linger = opts.get("kafka.linger.ms", "5").strip()
    if not linger.isdigit():
        raise ValueError(f"Invalid value '{linger}' for option 'kafka.linger.ms', must be a non-negative integer")
    return SinkOptions(
        bootstrap_servers=bootstrap, topic=opts.get("topic", "").strip() or None, columns=columns,
        guarantee=guarantee, transactional_id_prefix=prefix, batch_id=int(batch_text) if batch_text else None,
        commit_topic=opts.get("committopic", COMMIT_TOPIC).strip() or COMMIT_TOPIC,
        acks="all" if acks == "-1" else acks, linger_ms=int(linger),
        batch_size=number("kafka.batch.size", 1 << 20), compression_type=compression,
        request_timeout_ms=number("kafka.request.timeout.ms", 30000),
        delivery_timeout_ms=number("kafka.delivery.timeout.ms", 120000),
        max_request_size=number("kafka.max.request.size", 1048576),
        transaction_timeout_ms=number("kafka.transaction.timeout.ms", 60000),
        client_id=opts.get("kafka.client.id", "").strip() or "kafkalite-spark-sink",
        security=security_from_options(opts),
        schema_registry_url=registry_url, key_avro=key_avro, value_avro=value_avro,
    )


def _check_columns(schema: StructType, topic_option: str | None, avro: set[str]) -> tuple[tuple[str, int], ...]:
    """Spark's ``KafkaWriter.validateQuery``: which input columns feed which part of a record."""
    by_name = {f.name.lower(): (i, f.dataType) for i, f in enumerate(schema.fields)}
    found: dict[str, int] = {}

    def check(name: str, allowed: tuple[DataType, ...], message: str) -> None:
        if name not in by_name:
            return
        index, dtype = by_name[name]
        # compared as DDL, so nullability inside arrays and structs does not matter (as in Spark)
        if name not in avro and dtype.simpleString() not in {a.simpleString() for a in allowed}:
            raise ValueError(message.format(dtype=dtype.simpleString()))
        found[name] = index

    if topic_option is None and "topic" not in by_name:
        raise ValueError("topic option required when no 'topic' attribute is present. "
                         "Use the topic option for setting a topic.")
    if "value" not in by_name:
        raise ValueError("Required attribute 'value' not found")
    check("topic", (StringType(),), "Topic type must be a StringType, found {dtype}")
    check("key", (StringType(), BinaryType()), "key attribute type must be a StringType or BinaryType, found {dtype}")
    check("value", (StringType(), BinaryType()),
          "value attribute type must be a StringType or BinaryType, found {dtype}")
    check("headers", (_HEADERS_TYPE,), "headers attribute type must be an array<struct<key:string,value:binary>>, "
                                       "found {dtype}")
    check("partition", (IntegerType(),), "partition attribute type must be an IntegerType, found {dtype}")
    # kafkalite's addition (Spark's Kafka sink has no such column): the record's CreateTime
    check("timestamp", (TimestampType(), LongType()),
          "timestamp attribute type must be a TimestampType or a LongType of epoch milliseconds, found {dtype}")
    return tuple(sorted(found.items()))
