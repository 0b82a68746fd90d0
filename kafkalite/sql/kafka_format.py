"""ksqlDB's ``KAFKA`` format (``KafkaSerdeFactory``): a single key or value column written by
Kafka's own serializers. INT is ``IntegerSerializer``'s 4 big-endian bytes, BIGINT
``LongSerializer``'s 8, DOUBLE ``DoubleSerializer``'s 8 (IEEE 754 bits), STRING UTF-8 text, BYTES
the bytes as they are; so a topic keyed by a Java producer's ``Long`` or ``Integer`` keys reads as
ksqlDB reads it, and what the queries write reads back in ksqlDB. Spark SQL both ways (``raw`` is
a binary column) and the same in Python for the engine's direct writes and reads.
"""
from __future__ import annotations

import struct
from typing import Any

from kafkalite.sql import ast

#: column types of the KAFKA format with a fixed binary width (struct codes, big-endian)
_BINARY = {"INT": ">i", "BIGINT": ">q", "DOUBLE": ">d"}


def read_sql(raw: str, t: ast.SqlType, spark_type: str) -> str:
    """Spark SQL of the column from its record bytes; a record of the wrong size is null (ksqlDB
    fails it as a deserialization error, which skips the record)."""
    name = t.name
    if name == "BYTES":
        return raw
    if name not in _BINARY:
        return f"CAST(CAST({raw} AS STRING) AS {spark_type})"
    width = 4 if name == "INT" else 8
    bits = f"CAST(conv(hex({raw}), 16, -10) AS BIGINT)"          # signed for 8 bytes, unsigned for 4
    if name == "INT":
        value = f"CAST({bits} - CASE WHEN {bits} >= 2147483648 THEN 4294967296 ELSE 0 END AS INT)"
    elif name == "BIGINT":
        value = bits
    else:
        value = f"CAST(reflect('java.lang.Double', 'longBitsToDouble', {bits}) AS DOUBLE)"
    return f"CASE WHEN length({raw}) = {width} THEN {value} END"


def write_sql(column: str, t: ast.SqlType) -> str:
    """Spark SQL of the record bytes of a column value (null stays null)."""
    name = t.name
    if name == "BYTES":
        return f"CAST({column} AS BINARY)"
    if name not in _BINARY:
        return f"CAST(CAST({column} AS STRING) AS BINARY)"
    if name == "DOUBLE":
        bits = f"CAST(reflect('java.lang.Double', 'doubleToRawLongBits', CAST({column} AS DOUBLE)) AS BIGINT)"
    else:
        bits = f"CAST({column} AS BIGINT)"
    digits = 8 if name == "INT" else 16                            # hex() of a negative is 16 digits
    return f"unhex(right(lpad(hex({bits}), 16, '0'), {digits}))"


def encode(value: Any, t: ast.SqlType) -> bytes:
    """A column value as the KAFKA format's bytes (not null)."""
    if t.name in _BINARY:
        return struct.pack(_BINARY[t.name], float(value) if t.name == "DOUBLE" else int(value))
    if t.name == "BYTES":
        return bytes(value)
    return (("true" if value else "false") if isinstance(value, bool) else str(value)).encode()


def decode(data: bytes, t: ast.SqlType) -> Any:
    """The KAFKA format's bytes as a column value; ValueError for bytes of the wrong size."""
    if t.name in _BINARY:
        try:
            return struct.unpack(_BINARY[t.name], data)[0]
        except struct.error:
            raise ValueError(f"{len(data)} bytes are no KAFKA {t.name}") from None
    if t.name == "BYTES":
        return data
    return data.decode()
