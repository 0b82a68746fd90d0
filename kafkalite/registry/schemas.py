"""Schema parsing and identity for the registry's schema types (AVRO, JSON): pure, no I/O.

A schema is identified, as in Confluent's registry, by its type, its *canonical string* and its
references: the same schema registered twice (under any subject) gets the same id.

* AVRO is parsed by Apache Avro's Python library (``avro``), which also does the compatibility
  check (:mod:`kafkalite.registry.compatibility`). The canonical string is the library's full JSON
  form of the parsed schema, compact: attribute order and whitespace no longer matter, while
  defaults, docs, aliases, logical types and custom properties stay (they matter to readers, so
  Avro's Parsing Canonical Form, which drops them, would merge schemas that differ). Named types
  of referenced schemas are parsed first into the same name table, so a reference is used by name.
* JSON (JSON Schema) is checked against its draft's meta-schema by ``jsonschema``; its canonical
  string is the compact JSON text (key order kept, as Confluent's Jackson output keeps it).

``normalize`` (Confluent's ``?normalize=true``) additionally sorts object keys, so two schemas
that differ only in key order are one schema.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.name
import avro.schema
import jsonschema
import jsonschema.exceptions
import jsonschema.validators

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
#: What ``GET /schemas/types`` lists. PROTOBUF is not supported (see the package docstring).
SCHEMA_TYPES = (JSON, AVRO)


class SchemaError(ValueError):
    """The schema text is not a valid schema of its type (the registry answers 42201)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference: ``name`` as the referring schema uses it, the subject and version it is."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Dependency:
    """A referenced schema, already looked up: its type, text and its own dependencies."""

    reference: Reference
    schema_type: str
    schema: str
    dependencies: tuple["Dependency", ...] = ()


@dataclass
class ParsedSchema:
    """A parsed, valid schema. ``obj`` is the avro ``Schema`` or the JSON Schema document."""

    schema_type: str
    canonical: str
    obj: Any
    references: tuple[Reference, ...]

    def identity(self) -> tuple[str, str, tuple[Reference, ...]]:
        """What makes two registrations the same schema (and so the same id)."""
        return (self.schema_type, self.canonical, self.references)


def schema_type_of(value: Any) -> str:
    """The request's ``schemaType``: AVRO when absent, else one we support (42201 otherwise)."""
    if value is None or value == "":
        return AVRO
    if not isinstance(value, str) or value.upper() not in (AVRO, JSON, PROTOBUF):
        raise SchemaError(f"Invalid schema type {value!r}")
    value = value.upper()
    if value == PROTOBUF:
        raise SchemaError("Invalid schema: schema type PROTOBUF is not supported by this registry")
    return value


def parse(schema_type: str, text: str, dependencies: tuple[Dependency, ...] = (), *,
          normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` as ``schema_type`` with its references resolved; raises :class:`SchemaError`."""
    if not isinstance(text, str):
        raise SchemaError("Invalid schema: the schema must be a string")
    refs = tuple(d.reference for d in dependencies)
    if schema_type == AVRO:
        return _parse_avro(text, dependencies, refs, normalize)
    if schema_type == JSON:
        return _parse_json(text, refs, normalize)
    raise SchemaError(f"Invalid schema type {schema_type}")


#: Deepest schema document accepted (JSON nesting). The parsers recurse, so without a limit of
#: our own the answer would depend on the interpreter's recursion limit of the moment.
MAX_SCHEMA_DEPTH = 256


def nesting_depth(doc: Any) -> int:
    """How deeply ``doc`` (decoded JSON) nests arrays and objects, counted without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(doc, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            depth += 1
            deepest = max(deepest, depth)
            todo.extend((child, depth) for child in node)
    return deepest


def _load_schema_json(text: str) -> Any:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"Invalid schema: {exc}") from None
    except RecursionError:
        raise SchemaError("Invalid schema: nested too deeply") from None
    if nesting_depth(doc) > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"Invalid schema: nested more than {MAX_SCHEMA_DEPTH} levels deep")
    return doc


# -- AVRO --------------------------------------------------------------------------------------
def _avro_load(text: str, names: avro.name.Names) -> avro.schema.Schema:
    doc = _load_schema_json(text)
    try:
        return avro.schema.make_avsc_object(doc, names)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError, ValueError) as exc:
        raise SchemaError(f"Invalid schema: {exc}") from None
    except RecursionError:
        raise SchemaError("Invalid schema: nested too deeply") from None


def _add_avro_dependencies(deps: tuple[Dependency, ...], names: avro.name.Names, seen: set[Reference]) -> None:
    """Parse referenced schemas depth first into ``names`` (each once)."""
    for dep in deps:
        if dep.reference in seen:
            continue
        seen.add(dep.reference)
        _add_avro_dependencies(dep.dependencies, names, seen)
        if dep.schema_type != AVRO:
            raise SchemaError(f"Invalid schema: reference {dep.reference.name!r} is a {dep.schema_type} schema")
        try:
            _avro_load(dep.schema, names)
        except SchemaError as exc:
            raise SchemaError(f"Invalid schema: reference {dep.reference.name!r}: {exc}") from None


def _parse_avro(text: str, deps: tuple[Dependency, ...], refs: tuple[Reference, ...],
                normalize: bool) -> ParsedSchema:
    names = avro.name.Names()
    _add_avro_dependencies(deps, names, set())
    referenced = dict(names.names)
    schema = _avro_load(text, names)
    # Emit the schema itself with referenced types by name only (a copy of the table that holds
    # exactly the referenced types: the schema's own named types are written out in full).
    own = avro.name.Names()
    own.names = dict(referenced)
    canonical = json.dumps(schema.to_json(own), separators=(",", ":"), sort_keys=normalize)
    return ParsedSchema(AVRO, canonical, schema, refs)


# -- JSON Schema -------------------------------------------------------------------------------
def _parse_json(text: str, refs: tuple[Reference, ...], normalize: bool) -> ParsedSchema:
    doc = _load_schema_json(text)
    if not isinstance(doc, (dict, bool)):
        raise SchemaError("Invalid schema: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(doc).check_schema(doc)  # type: ignore[arg-type]  # stub: a boolean schema is valid too
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaError(f"Invalid schema: {exc.message}") from None
    except (TypeError, ValueError, LookupError) as exc:
        raise SchemaError(f"Invalid schema: {exc}") from None
    except RecursionError:
        raise SchemaError("Invalid schema: nested too deeply") from None
    canonical = json.dumps(doc, separators=(",", ":"), sort_keys=normalize)
    return ParsedSchema(JSON, canonical, doc, refs)
