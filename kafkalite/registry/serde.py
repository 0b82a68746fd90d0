"""Confluent's wire format for registry-framed Avro: magic byte 0, 4-byte big-endian schema id,
then the Avro binary encoding (fastavro: schemaless reader/writer, and Avro's JSON encoding for
the console tools' text in and out). Pure apart from the registry lookups it is handed."""
from __future__ import annotations

import io
import json
import struct
from typing import Any, Callable, Sequence

import fastavro
import fastavro.schema

from .client import RegisteredSchema

MAGIC = 0
_HEADER = struct.Struct(">bI")


class SerdeError(ValueError):
    """A value that is not registry-framed Avro, or does not match its schema."""


def parse_avro(schema: str, dependencies: Sequence[tuple[str, str]] = ()) -> Any:
    """A fastavro parsed schema, referenced named types first."""
    named: dict[str, Any] = {}
    try:
        for _, text in dependencies:
            fastavro.parse_schema(json.loads(text), named_schemas=named)
        return fastavro.parse_schema(json.loads(schema), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException,
            fastavro.schema.UnknownType) as exc:
        raise SerdeError(f"invalid Avro schema: {exc}") from None


def encode(schema_id: int, parsed: Any, datum: Any) -> bytes:
    out = io.BytesIO()
    out.write(_HEADER.pack(MAGIC, schema_id))
    try:
        fastavro.schemaless_writer(out, parsed, datum)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise SerdeError(f"the record does not match the schema: {exc}") from None
    return out.getvalue()


def schema_id_of(data: bytes) -> int:
    if data is None or len(data) < 5:
        raise SerdeError("Unknown magic byte!" if data else "no data")
    magic, schema_id = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise SerdeError("Unknown magic byte!")
    return schema_id


def decode(data: bytes, lookup: Callable[[int], tuple[RegisteredSchema, Any]]) -> tuple[int, Any, Any]:
    """(schema id, parsed writer schema, datum) of a framed value; ``lookup`` gives an id's schema."""
    schema_id = schema_id_of(data)
    _, parsed = lookup(schema_id)
    try:
        datum = fastavro.schemaless_reader(io.BytesIO(memoryview(data)[5:]), parsed, None)
    except (ValueError, TypeError, EOFError, IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise SerdeError(f"cannot decode the Avro data of schema id {schema_id}: {exc}") from None
    return schema_id, parsed, datum


def from_json(parsed: Any, line: str) -> Any:
    """One record in Avro's JSON encoding (unions as {"type": value}), as kafka-avro-console-producer reads."""
    try:
        return next(fastavro.json_reader(io.StringIO(line), parsed))
    except StopIteration:
        raise SerdeError("empty line") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SerdeError(f"the JSON does not match the schema: {exc}") from None


def to_json(parsed: Any, datum: Any) -> str:
    """A datum in Avro's JSON encoding, one line."""
    out = io.StringIO()
    fastavro.json_writer(out, parsed, [datum])
    return out.getvalue().rstrip("\n")
