"""How a record's key or value is shown: UTF-8 text, JSON (pretty), registry-framed Avro, or hex.

``auto`` picks the first that fits: Avro when the bytes carry Confluent's framing (magic 0 and a
schema id the registry knows), JSON when they parse as a JSON object or array, text when they
are valid UTF-8, hex otherwise. The result is plain text: the templates escape it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kafkalite.registry import serde
from kafkalite.registry.client import RegisteredSchema, RegistryClient, RegistryClientError

FORMATS = ("auto", "text", "json", "avro", "hex")
#: longest text shown for one key or value; the rest is cut (the page stays bounded)
MAX_SHOWN = 64 * 1024


@dataclass(frozen=True)
class Decoded:
    format: str            # text | json | avro | hex | null
    text: str
    schema_id: int | None = None
    error: str = ""        # why the asked-for format did not fit (then text is hex)


def hexdump(data: bytes) -> str:
    return data[:MAX_SHOWN].hex(" ")


class Decoder:
    """Decodes with one registry client whose parsed schemas are cached by id (ids never change)."""

    def __init__(self, registry: RegistryClient | None) -> None:
        self.registry = registry
        self._parsed: dict[int, tuple[RegisteredSchema, Any]] = {}

    def _lookup(self, schema_id: int) -> tuple[RegisteredSchema, Any]:
        if schema_id not in self._parsed:
            if self.registry is None:
                raise serde.SerdeError("no schema registry is configured (--registry-url)")
            try:
                schema = self.registry.by_id(schema_id)
            except RegistryClientError as exc:
                raise serde.SerdeError(str(exc)) from None
            if schema.schema_type != "AVRO":
                raise serde.SerdeError(f"schema {schema_id} is {schema.schema_type}, not AVRO")
            self._parsed[schema_id] = (schema, serde.parse_avro(schema.schema, schema.dependencies))
        return self._parsed[schema_id]

    def decode(self, data: bytes | None, fmt: str = "auto") -> Decoded:
        if data is None:
            return Decoded("null", "")
        attempts: Sequence[tuple[str, Callable[[bytes], Decoded]]] = {
            "auto": [("avro", self._avro), ("json", _json), ("text", _text)],
            "avro": [("avro", self._avro)], "json": [("json", _json)], "text": [("text", _text)],
            "hex": []}.get(fmt, [])
        error = ""
        for _name, attempt in attempts:
            try:
                return attempt(data)
            except (ValueError, serde.SerdeError) as exc:
                if fmt != "auto":
                    error = f"not {fmt}: {exc}"
        return Decoded("hex", hexdump(data), error=error)

    def _avro(self, data: bytes) -> Decoded:
        if len(data) < 5 or data[0] != serde.MAGIC:
            raise serde.SerdeError("no registry framing (magic byte 0 and a schema id)")
        schema_id, parsed, datum = serde.decode(data, self._lookup)
        return Decoded("avro", _cut(json.dumps(json.loads(serde.to_json(parsed, datum)), indent=2,
                                               ensure_ascii=False)), schema_id)


def _json(data: bytes) -> Decoded:
    doc = json.loads(data.decode("utf-8"))
    if not isinstance(doc, (dict, list)):
        raise ValueError("not a JSON object or array")
    return Decoded("json", _cut(json.dumps(doc, indent=2, ensure_ascii=False)))


def _text(data: bytes) -> Decoded:
    return Decoded("text", _cut(data.decode("utf-8")))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"… ({len(text) - MAX_SHOWN} more characters)"
