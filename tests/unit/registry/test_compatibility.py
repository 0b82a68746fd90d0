"""The compatibility levels and checks (AVRO through Apache Avro's checker, JSON Schema rules)."""
from __future__ import annotations

import json

import pytest

from kafkalite.registry import compatibility as C
from kafkalite.registry.schemas import AVRO, JSON, Dependency, Reference, SchemaError, parse


def avro(fields: list[dict], name: str = "User") -> object:
    return parse(AVRO, json.dumps({"type": "record", "name": name, "fields": fields}))


V1 = [{"name": "id", "type": "long"}]
V2_OPTIONAL = V1 + [{"name": "email", "type": ["null", "string"], "default": None}]
V2_REQUIRED = V1 + [{"name": "email", "type": "string"}]
V0_INT = [{"name": "id", "type": "int"}]


@pytest.mark.parametrize("level, new, old, ok", [
    # adding a field with a default: every direction
    ("BACKWARD", V2_OPTIONAL, V1, True), ("FORWARD", V2_OPTIONAL, V1, True), ("FULL", V2_OPTIONAL, V1, True),
    # adding a required field: the new reader cannot fill it from old data; old readers ignore it
    ("BACKWARD", V2_REQUIRED, V1, False), ("FORWARD", V2_REQUIRED, V1, True), ("FULL", V2_REQUIRED, V1, False),
    # removing a field without default: old readers miss it
    ("BACKWARD", V1, V2_REQUIRED, True), ("FORWARD", V1, V2_REQUIRED, False),
    # int -> long is a promotion a long reader does; the reverse is not
    ("BACKWARD", V1, V0_INT, True), ("FORWARD", V1, V0_INT, False),
    ("NONE", V2_REQUIRED, V1, True),
])
def test_avro_levels_against_latest(level: str, new: list, old: list, ok: bool) -> None:
    """Each level checks the direction(s) it names, decided by Avro's resolution rules."""
    messages = C.check(level, avro(new), [(1, avro(old))])
    assert (messages == []) is ok, messages
    if not ok:
        assert messages[-1] == f"{{compatibility: '{level}'}}"
        assert "{oldSchemaVersion: 1}" in messages


def test_transitive_levels_check_every_version_plain_levels_only_the_latest() -> None:
    """v1 -> v2 (drops 'name', defaulted) -> v3 (re-adds 'name' without default): BACKWARD passes
    against v2 alone, BACKWARD_TRANSITIVE fails against v1, naming that version."""
    v1 = avro([{"name": "id", "type": "long"}, {"name": "name", "type": "string"}])
    v2 = avro([{"name": "id", "type": "long"}])
    v3 = avro([{"name": "id", "type": "long"}, {"name": "name", "type": "int", "default": 0}])
    assert C.check("BACKWARD", v3, [(1, v1), (2, v2)]) == []
    messages = C.check("BACKWARD_TRANSITIVE", v3, [(1, v1), (2, v2)])
    assert "{oldSchemaVersion: 1}" in messages and "{oldSchemaVersion: 2}" not in messages
    assert any("TYPE_MISMATCH" in m for m in messages)


def test_enum_symbols_and_type_change() -> None:
    """Removing an enum symbol breaks BACKWARD (old data may hold it); changing the schema type
    (AVRO -> JSON) is always incompatible."""
    e1 = parse(AVRO, '{"type":"enum","name":"C","symbols":["A","B"]}')
    e2 = parse(AVRO, '{"type":"enum","name":"C","symbols":["A"]}')
    assert C.check("BACKWARD", e2, [(1, e1)]) != []
    assert C.check("FORWARD", e2, [(1, e1)]) == []
    j = parse(JSON, '{"type":"string"}')
    assert any("Incompatible schema type" in m for m in C.check("FORWARD", j, [(1, e1)]))


def test_avro_references_resolve_named_types() -> None:
    """A schema using a referenced named type parses, and its canonical text names the type
    without inlining it (so the stored schema stays the one registered)."""
    dep = Dependency(Reference("Address", "addr", 1), AVRO,
                     '{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}')
    user = parse(AVRO, '{"type":"record","name":"U","fields":[{"name":"a","type":"Address"}]}', (dep,))
    assert '"type":"Address"' in user.canonical and "city" not in user.canonical
    assert user.references == (Reference("Address", "addr", 1),)
    with pytest.raises(SchemaError):
        parse(AVRO, '{"type":"record","name":"U","fields":[{"name":"a","type":"Address"}]}')


def test_identity_ignores_whitespace_and_attribute_order_but_not_defaults() -> None:
    """Same schema, differently written -> same canonical text; a different default -> different."""
    a = parse(AVRO, '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "int", "default": 1}]}')
    b = parse(AVRO, '{"fields":[{"default":1,"type":"int","name":"x"}],"name":"A","type":"record"}')
    c = parse(AVRO, '{"type":"record","name":"A","fields":[{"name":"x","type":"int","default":2}]}')
    assert a.identity() == b.identity() != c.identity()


@pytest.mark.parametrize("text", ['{"type":"record","name":"k","fields":[{"name":"key","type":"array","items":"string"}]}',
                                  "not json", '{"type":"nope"}', '{"type":"enum","name":"E","symbols":["A","A"]}'])
def test_invalid_avro_is_a_schema_error(text: str) -> None:
    with pytest.raises(SchemaError, match="Invalid schema"):
        parse(AVRO, text)


def J(doc: dict) -> object:
    return parse(JSON, json.dumps(doc))


OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
CLOSED = {**OPEN, "additionalProperties": False}


@pytest.mark.parametrize("new, old, backward_ok, forward_ok", [
    # closed content model: adding an optional property is backward compatible, not forward
    ({**CLOSED, "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}, CLOSED, True, False),
    # open content model: old documents may carry 'b' with any value: not backward compatible
    ({**OPEN, "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}, OPEN, False, True),
    # a new required property
    ({**CLOSED, "required": ["a"]}, CLOSED, False, True),
    # widening integer -> number
    ({"type": "number"}, {"type": "integer"}, True, False),
    # enum growing
    ({"enum": ["x", "y", "z"]}, {"enum": ["x", "y"]}, True, False),
    # maxLength tightened
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, False, True),
    # a oneOf growing a branch
    ({"oneOf": [{"type": "string"}, {"type": "number"}]}, {"oneOf": [{"type": "string"}]}, True, False),
    # annotations only
    ({**OPEN, "title": "T", "description": "d"}, OPEN, True, True),
])
def test_json_schema_rules(new: dict, old: dict, backward_ok: bool, forward_ok: bool) -> None:
    """JSON Schema: the reader must accept every document the writer accepts."""
    assert (C.check("BACKWARD", J(new), [(1, J(old))]) == []) is backward_ok
    assert (C.check("FORWARD", J(new), [(1, J(old))]) == []) is forward_ok


def test_json_schema_unanalysed_keywords_are_refused_not_passed() -> None:
    """A change in a keyword the checker does not analyse is reported, never silently accepted."""
    old = J({"type": "object", "patternProperties": {"^x": {"type": "string"}}})
    new = J({"type": "object", "patternProperties": {"^x": {"type": "number"}}})
    assert any("PATTERNPROPERTIES_CHANGED" in m for m in C.check("BACKWARD", new, [(1, old)]))


def test_invalid_json_schema() -> None:
    with pytest.raises(SchemaError, match="Invalid schema"):
        parse(JSON, '{"type": 12}')
    with pytest.raises(SchemaError):
        parse(JSON, "[1, 2]")
