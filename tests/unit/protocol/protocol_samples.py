"""Builds populated message dicts from the tables, for round-trip, interop and fuzz tests.

Every field on the wire in the version gets a non-default value (so a dropped or misplaced
field shows up), nullable fields get ``None`` when ``nulls`` is set, and fields absent from
the version hold their default (which is what the decoder reports for them).
"""
from __future__ import annotations

import uuid
from typing import Any

from kafkalite.protocol.schema import FieldSpec, MessageSpec, StructSpec

_INT_LIMITS = {"int8": 127, "int16": 32767, "uint16": 65535, "int32": 2**31 - 1,
               "uint32": 2**32 - 1, "int64": 2**63 - 1}


def _scalar(f: FieldSpec, elem: str, seed: int) -> Any:
    default = f.default if f.has_default and not f.is_array else None
    if elem in _INT_LIMITS:
        value = (seed * 7919 + 3) % min(_INT_LIMITS[elem], 30000) + 1
        if elem == "int64":
            value = value * 1_000_003 + 2**40
        return value + 1 if value == default else value
    if elem == "bool":
        return not (default if isinstance(default, bool) else False)
    if elem == "float64":
        return seed + 0.25
    if elem == "uuid":
        return uuid.UUID(int=(seed + 1) * 0x1000000000000000000000001)
    if elem == "string":
        return f"{f.key}-{seed}" + ("-é☃" if seed % 2 else "")
    if elem == "bytes":
        return bytes([seed % 256, 1, 2, 3])
    if elem == "records":
        return bytes(range(seed % 7, seed % 7 + 20))
    raise AssertionError(elem)


def sample_struct(spec: StructSpec, version: int, *, nulls: bool, seed: int = 1) -> dict:
    """A dict for ``spec`` at ``version`` with every on-wire field set away from its default."""
    out: dict[str, Any] = {}
    for i, f in enumerate(spec.fields):
        s = seed * 31 + i
        if not f.present(version):
            out[f.key] = f.default_value()
        elif nulls and f.nullable_in(version):
            out[f.key] = None
        elif f.is_array:
            if f.elem == "struct":
                out[f.key] = [sample_struct(f.struct, version, nulls=nulls, seed=s + k)  # type: ignore[arg-type]
                              for k in range(2)]
            else:
                out[f.key] = [_scalar(f, f.elem, s + k) for k in range(3)]
        elif f.elem == "struct":
            out[f.key] = sample_struct(f.struct, version, nulls=nulls, seed=s)  # type: ignore[arg-type]
        else:
            out[f.key] = _scalar(f, f.elem, s)
    return out


def sample_message(spec: MessageSpec, version: int, *, nulls: bool, seed: int = 1) -> dict:
    return sample_struct(spec.body, version, nulls=nulls, seed=seed)


def all_versions(spec: MessageSpec) -> range:
    return range(spec.valid[0], spec.valid[1] + 1)
