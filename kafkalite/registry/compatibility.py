"""Compatibility levels and checks (Confluent's rules): pure, no I/O.

A level says which earlier versions a new schema is checked against and in which direction:

| level               | checked against          | the new schema must ...                  |
|---------------------|--------------------------|------------------------------------------|
| BACKWARD            | the latest version       | read data written with it                |
| BACKWARD_TRANSITIVE | every (undeleted) version| read data written with each              |
| FORWARD             | the latest version       | be readable by it                        |
| FORWARD_TRANSITIVE  | every version            | be readable by each                      |
| FULL                | the latest version       | both                                     |
| FULL_TRANSITIVE     | every version            | both                                     |
| NONE                | nothing                  |                                          |

AVRO pairs are decided by Apache Avro's ``ReaderWriterCompatibilityChecker`` (Avro's schema
resolution rules: promotions int->long->float->double, string<->bytes, added fields need
defaults, enum symbols, union branches, names and aliases...).

JSON Schema has no resolution rules of its own; as Confluent does, "reader R can read writer W"
means R accepts every document W accepts. :func:`_json_reads` proves that for the keywords it
knows and reports every other difference as incompatible (never a silent pass):
covered: ``type`` (with integer inside number), ``properties`` against open and closed content
models (``additionalProperties``), ``required``, ``items`` (schema form), ``enum``, ``const``,
string ``minLength``/``maxLength``/``pattern``, number ``minimum``/``maximum``/``exclusive*``/
``multipleOf``, array ``minItems``/``maxItems``/``uniqueItems``, object ``min/maxProperties``,
``anyOf``/``oneOf`` (each writer branch must be read by some reader branch; oneOf's exclusivity is
not checked) and the annotation
keywords (``title``, ``description``, ``default``, ``examples``, ``$id``, ``$schema``, ...).
Not covered (a change in them is reported incompatible): ``$ref`` targets (compared as text),
``allOf``, ``not``, ``if/then/else``, ``patternProperties``, ``dependencies``/``dependent*``,
tuple-form ``items``/``prefixItems``, ``contains``, ``propertyNames``, ``format``.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import avro.compatibility

from .schemas import AVRO, ParsedSchema

BACKWARD, BACKWARD_TRANSITIVE = "BACKWARD", "BACKWARD_TRANSITIVE"
FORWARD, FORWARD_TRANSITIVE = "FORWARD", "FORWARD_TRANSITIVE"
FULL, FULL_TRANSITIVE, NONE = "FULL", "FULL_TRANSITIVE", "NONE"
LEVELS = (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE)
DEFAULT_LEVEL = BACKWARD

_BACKWARD_CHECK = {BACKWARD, BACKWARD_TRANSITIVE, FULL, FULL_TRANSITIVE}
_FORWARD_CHECK = {FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE}


def parse_level(value: Any) -> str | None:
    """The level named by ``value`` (case-insensitive), None if it names none."""
    if isinstance(value, str) and value.upper() in LEVELS:
        return value.upper()
    return None


def is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


def check(level: str, new: ParsedSchema, previous: list[tuple[int, ParsedSchema]]) -> list[str]:
    """Messages explaining why ``new`` breaks ``level`` against ``previous`` (oldest first); [] if not.

    ``previous`` are the subject's undeleted versions; a non-transitive level looks at the last only.
    """
    if level == NONE or not previous:
        return []
    against = previous if is_transitive(level) else previous[-1:]
    messages: list[str] = []
    for version, old in reversed(against):          # newest first, as Confluent reports
        problems: list[str] = []
        if old.schema_type != new.schema_type:
            problems.append(f"Incompatible schema type: {new.schema_type} cannot replace {old.schema_type}")
        else:
            if level in _BACKWARD_CHECK:
                problems.extend(reads(new, old))
            if level in _FORWARD_CHECK:
                problems.extend(reads(old, new))
        if problems:
            messages.extend(problems)
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{old.canonical}'}}")
    if messages:
        messages.append(f"{{compatibility: '{level}'}}")
    return messages


def reads(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` ([] when it can)."""
    if reader.schema_type == AVRO:
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader.obj, writer.obj)
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        incompat = [str(t.name).upper() for t in result.incompatibilities] or ["INCOMPATIBLE"]
        where = sorted(result.locations) or ["/"]
        detail = ", ".join(sorted(str(m) for m in result.messages)) or "schemas differ"
        return [f"{{errorType:'{kind}', description:'The reader (new or old schema) cannot read data of the "
                f"writer at path {path}: {detail}', additionalInfo:'{detail}'}}"
                for kind, path in zip(incompat, where + where[-1:] * max(0, len(incompat) - len(where)))]
    return [f"{{errorType:'{kind}', description:'at path {path}: {detail}'}}"
            for kind, path, detail in _json_reads(reader.obj, writer.obj, "#")]


# -- JSON Schema ---------------------------------------------------------------------------------
_ANNOTATIONS = {"title", "description", "default", "examples", "$comment", "$id", "id", "$schema",
                "readOnly", "writeOnly", "deprecated", "definitions", "$defs"}
_ALL_TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}
_Problem = tuple[str, str, str]


def _types(schema: dict[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _covers(reader_types: set[str] | None, writer_types: set[str] | None) -> bool:
    if reader_types is None:
        return True
    if writer_types is None:
        return reader_types >= _ALL_TYPES - {"integer"}
    expanded = set(reader_types) | ({"integer"} if "number" in reader_types else set())
    return writer_types <= expanded


def _bound(reader: dict, writer: dict, key: str, lower: bool, path: str) -> list[_Problem]:
    """A reader bound must be no tighter than the writer's (absent = unbounded)."""
    r, w = reader.get(key), writer.get(key)
    if r is None:
        return []
    if w is None or (w < r if lower else w > r):
        kind = f"{key.upper()}_{'INCREASED' if lower else 'DECREASED'}" if w is not None else f"{key.upper()}_ADDED"
        return [(kind, path, f"reader {key} {r} is tighter than the writer's {w}")]
    return []


def _closed(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties") is False


def _json_reads(reader: Any, writer: Any, path: str) -> list[_Problem]:
    """Differences that let ``writer`` accept a document ``reader`` refuses."""
    if reader is True or reader == {}:
        return []
    if writer is False:
        return []
    if reader is False:
        return [("SCHEMA_FALSE", path, "the reader accepts nothing")]
    if writer is True:
        writer = {}
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return [("TYPE_CHANGED", path, "not a schema")]
    if reader == writer:
        return []
    combined = _json_combined(reader, writer, path)
    if combined is not None:
        return combined
    problems: list[_Problem] = []
    rt, wt = _types(reader), _types(writer)
    if not _covers(rt, wt):
        problems.append(("TYPE_NARROWED", path, f"reader type {sorted(rt or [])} does not take writer type "
                                                f"{sorted(wt) if wt else 'any'}"))
    # enum / const
    if "enum" in reader:
        if "enum" in writer:
            missing = [v for v in writer["enum"] if v not in reader["enum"]]
            if missing:
                problems.append(("ENUM_ARRAY_NARROWED", path, f"values {json.dumps(missing)} no longer allowed"))
        elif "const" not in writer or writer["const"] not in reader["enum"]:
            problems.append(("ENUM_ARRAY_ADDED", path, "the reader restricts values to an enum"))
    if "const" in reader and writer.get("const", object()) != reader["const"] and not (
            "enum" in writer and all(v == reader["const"] for v in writer["enum"])):
        problems.append(("CONST_CHANGED", path, "the reader requires a constant the writer does not"))
    # numbers, strings, arrays, objects
    for key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
        problems.extend(_bound(reader, writer, key, True, path))
    for key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
        problems.extend(_bound(reader, writer, key, False, path))
    if "multipleOf" in reader and (writer.get("multipleOf") is None
                                   or writer["multipleOf"] % reader["multipleOf"] != 0):
        problems.append(("MULTIPLE_OF_CHANGED", path, "multipleOf differs"))
    for key in ("pattern", "uniqueItems"):
        if key in reader and reader[key] not in (writer.get(key), False):
            problems.append((f"{key.upper()}_CHANGED", path, f"{key} differs"))
    if "items" in reader and isinstance(reader["items"], (dict, bool)):
        w_items = writer.get("items", True)
        if isinstance(w_items, (dict, bool)):
            problems.extend(_json_reads(reader["items"], w_items, f"{path}/items"))
        else:
            problems.append(("ITEMS_CHANGED", f"{path}/items", "tuple-form items are not compared"))
    problems.extend(_json_object(reader, writer, path))
    # everything else must be equal
    handled = _ANNOTATIONS | {"type", "enum", "const", "minimum", "exclusiveMinimum", "minLength", "minItems",
                              "minProperties", "maximum", "exclusiveMaximum", "maxLength", "maxItems",
                              "maxProperties", "multipleOf", "pattern", "uniqueItems", "items", "properties",
                              "required", "additionalProperties", "anyOf", "oneOf"}
    for key in sorted((set(reader) | set(writer)) - handled):
        if reader.get(key) != writer.get(key):
            problems.append((f"{key.upper().lstrip('$')}_CHANGED", path,
                             f"keyword {key!r} changed (not analysed, so refused)"))
    return problems


def _json_object(reader: dict, writer: dict, path: str) -> list[_Problem]:
    problems: list[_Problem] = []
    r_props: dict = reader.get("properties") or {}
    w_props: dict = writer.get("properties") or {}
    r_add = reader.get("additionalProperties", True)
    w_add = writer.get("additionalProperties", True)
    for name in sorted(set(r_props) | set(w_props)):
        where = f"{path}/properties/{name}"
        if name in r_props and name in w_props:
            problems.extend(_json_reads(r_props[name], w_props[name], where))
        elif name in w_props:
            # the writer's documents may carry the property; the reader must take it
            problems.extend(("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" if _closed(reader) else kind, where, d)
                            for kind, _, d in _json_reads(r_add if isinstance(r_add, (dict, bool)) else True,
                                                          w_props[name], where))
        else:
            # the writer put no constraint on it beyond its additionalProperties
            if w_add is not False:
                for kind, _, d in _json_reads(r_props[name], w_add if isinstance(w_add, (dict, bool)) else True,
                                              where):
                    problems.append(("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, d))
    if isinstance(r_add, (dict, bool)) and r_add is not True and w_add is not False:
        if r_add is False:
            problems.append(("ADDITIONAL_PROPERTIES_REMOVED", path, "the reader refuses properties the writer allows"))
        else:
            problems.extend(_json_reads(r_add, w_add if isinstance(w_add, (dict, bool)) else True,
                                        f"{path}/additionalProperties"))
    added = sorted(set(reader.get("required") or []) - set(writer.get("required") or []))
    if added:
        problems.append(("REQUIRED_PROPERTY_ADDED", path, f"required {added} not required by the writer"))
    return problems


def _branches(schema: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """(keyword, branches) of an anyOf/oneOf schema, each branch merged with the schema's other keywords."""
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            return key, [{**base, **b} if isinstance(b, dict) else b for b in schema[key]]
    return None


def _json_combined(reader: dict, writer: dict, path: str) -> list[_Problem] | None:
    """anyOf/oneOf (oneOf taken as anyOf): every writer branch must be read by some reader branch.

    None when neither side is combined (the caller compares keywords instead)."""
    r, w = _branches(reader), _branches(writer)
    if r is None and w is None:
        return None
    w_key, w_list = w if w is not None else ("", [writer])
    problems: list[_Problem] = []
    for i, wb in enumerate(w_list):
        where = f"{path}/{w_key}/{i}" if w_key else path
        if r is None:
            problems.extend(_json_reads(reader, wb, where))
        elif not any(not _json_reads(rb, wb, where) for rb in r[1]):
            problems.append(("COMBINED_TYPE_SUBSCHEMAS_CHANGED", where, f"no {r[0]} branch of the reader takes it"))
    return problems
