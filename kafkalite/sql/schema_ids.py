"""Registry schemas named in a statement's WITH clause, as ksqlDB 0.2x handles them.

``KEY_SCHEMA_ID`` / ``VALUE_SCHEMA_ID`` (ksqlDB's ``DefaultSchemaInjector`` and
``SchemaRegistryTopicSchemaSupplier``): a CREATE STREAM/TABLE takes that side's columns from the
schema with this id (not from the subject's latest version), field names kept as the schema
spells them (ksqlDB's ``ORIGINAL_FIELD_NAME`` policy), and the schema itself is registered under
``<topic>-key`` / ``<topic>-value`` before the statement is logged (``SchemaRegisterInjector``'s
raw-schema path), which must give back the same id. The checks and messages are ksqlDB's: a
format without schema inference, columns declared beside the id, an id the registry does not
know, a schema of another type, a schema ksqlDB cannot read.

Nothing here touches Spark or the command topic; the engine calls it while validating a
statement, and again (fetching by id, which never changes meaning) when it applies one.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from kafkalite.sql import ast, avro_keys, serde
from kafkalite.sql.errors import KsqlError

if TYPE_CHECKING:
    from kafkalite.registry.client import RegisteredSchema, RegistryClientError

#: the formats with ksqlDB's SCHEMA_INFERENCE feature that this server reads (PROTOBUF and
#: JSON_SR have it in ksqlDB but are not formats here)
INFERENCE_FORMATS = ("AVRO",)
_SR_DOC = "https://docs.confluent.io/platform/current/schema-registry/serdes-develop/index.html"
_ISSUES = ("Please see https://github.com/confluentinc/ksql/issues/ to see if this particular reason is already "
           "known.\nIf not, please log a new issue, including this full error message.")


def _side(is_key: bool) -> tuple[str, str, str]:
    """(the id property, the format property, ``key``/``value``) of one side."""
    return ("KEY_SCHEMA_ID", "KEY_FORMAT", "key") if is_key else ("VALUE_SCHEMA_ID", "VALUE_FORMAT", "value")


def subject(topic: str, is_key: bool) -> str:
    """``KsqlConstants.getSRSubject``."""
    return f"{topic}-{'key' if is_key else 'value'}"


def requested(props: Mapping[str, Any], fmt: str, is_key: bool, declared: bool, text: str) -> int | None:
    """The side's schema id, checked as ``DefaultSchemaInjector.shouldInferSchema`` checks it: an
    integer, a format with schema inference, no columns declared on that side (``declared``; a
    CREATE ... AS SELECT has none). None if the property is not given."""
    name, format_prop, _ = _side(is_key)
    value = props.get(name)
    if value is None:
        return None
    try:
        schema_id = int(str(value))
    except ValueError:
        raise KsqlError(f"Invalid value {value} for configuration {name}: Not a number of type INT",
                        statement=text) from None
    if fmt not in INFERENCE_FORMATS:
        raise KsqlError(f"{format_prop} should support schema inference when {name} is provided. "
                        f"Current format is {fmt}.", statement=text)
    if declared:
        raise KsqlError(f"Table elements and {name} cannot both exist for create statement.", statement=text)
    return schema_id


FULL_NAME_PROPS = ("KEY_SCHEMA_FULL_NAME", "VALUE_SCHEMA_FULL_NAME", "VALUE_AVRO_SCHEMA_FULL_NAME")


def full_names(props: Mapping[str, Any], key_format: str, value_format: str, text: str
               ) -> tuple[str | None, str | None]:
    """``KEY_SCHEMA_FULL_NAME`` and ``VALUE_SCHEMA_FULL_NAME`` (or the older
    ``VALUE_AVRO_SCHEMA_FULL_NAME``, not both: ``CommonCreateConfigs.validateKeyValueFormats``),
    the full names of the Avro records ksqlDB registers; a format that registers no schema
    refuses the property as ksqlDB's ``FormatProperties`` does."""
    legacy, value = props.get("VALUE_AVRO_SCHEMA_FULL_NAME"), props.get("VALUE_SCHEMA_FULL_NAME")
    if legacy is not None and value is not None:
        raise KsqlError("Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and 'VALUE_SCHEMA_FULL_NAME' properties. "
                        "Please only set 'VALUE_SCHEMA_FULL_NAME'.", statement=text)
    key = props.get("KEY_SCHEMA_FULL_NAME")
    value = legacy if legacy is not None else value
    for name, fmt in ((key, key_format), (value, value_format)):
        if name is not None and fmt not in INFERENCE_FORMATS:
            raise KsqlError(f"{fmt} does not support the following configs: [fullSchemaName]", statement=text)
    return (None if key is None else str(key)), (None if value is None else str(value))


def _source(topic: str, schema_id: int) -> str:
    """``SchemaRegistryTopicSchemaSupplier.sourceMsg``."""
    return f"topic: {topic}, schema id: {schema_id}"


def not_found(topic: str, schema_id: int, is_key: bool) -> str:
    """ksqlDB's message for an id the registry does not have (or will not show)."""
    return (f"Schema for message {'keys' if is_key else 'values'} on topic '{topic}' does not exist in the Schema "
            f"Registry.\nSubject: {subject(topic, is_key)}\nSchema Id: {schema_id}\nPossible causes include:\n"
            "- The topic itself does not exist\n\t-> Use SHOW TOPICS; to check\n- Messages on the topic are not "
            f"serialized using a format Schema Registry supports\n\t-> Use PRINT '{topic}' FROM BEGINNING; to "
            "verify\n- Messages on the topic have not been serialized using a Confluent Schema Registry supported "
            f"serializer\n\t-> See {_SR_DOC}\n- The schema is registered on a different instance of the Schema "
            "Registry\n\t-> Use the REST API to list available subjects\t"
            "https://docs.confluent.io/platform/current/schema-registry/develop/api.html#get--subjects\n"
            "- You do not have permissions to access the Schema Registry.\n"
            "\t-> See https://docs.confluent.io/platform/current/schema-registry/security/index.html")


def fetch(registry_url: str | None, topic: str, schema_id: int, is_key: bool, text: str) -> "RegisteredSchema":
    """The schema with ``schema_id`` (``getSchemaBySubjectAndId``), an AVRO one, or ksqlDB's
    refusal: no registry configured, unknown id (404/401/403), another failure, another type."""
    from kafkalite.registry.client import RegistryClient, RegistryClientError

    if not registry_url:
        raise KsqlError(f"Cannot create topic '{topic}' with format AVRO without configuring "
                        "'ksql.schema.registry.url'", statement=text)
    try:
        registered = RegistryClient(registry_url).by_id(schema_id)
    except RegistryClientError as exc:
        if exc.status in (401, 403, 404):
            raise KsqlError(not_found(topic, schema_id, is_key), statement=text) from None
        raise KsqlError(f"Schema registry fetch for topic {'key' if is_key else 'value'} request failed for "
                        f"{_source(topic, schema_id)}", statement=text) from None
    if registered.schema_type != "AVRO":
        _, format_prop, _ = _side(is_key)
        raise KsqlError(f"{'Key' if is_key else 'Value'} schema is not in the expected format. You may want to set "
                        f"{format_prop} to '{registered.schema_type}'.\n{_source(topic, schema_id)}\n"
                        f"expected format: AVRO\nactual format from Schema Registry: {registered.schema_type}",
                        statement=text)
    return registered


def _not_compatible(topic: str, schema_id: int, registered: "RegisteredSchema", reason: str, is_key: bool,
                    text: str) -> KsqlError:
    return KsqlError(f"Unable to verify if the {'key' if is_key else 'value'} schema for {_source(topic, schema_id)} "
                     f"is compatible with ksqlDB.\nReason: {reason}\n\n{_ISSUES}\nSchema:{registered.schema}",
                     statement=text)


def value_columns(topic: str, schema_id: int, registered: "RegisteredSchema", text: str
                  ) -> tuple[ast.ColumnDef, ...]:
    """The value columns of a record schema, named as its fields are (``ORIGINAL_FIELD_NAME``),
    nested record fields too; a schema that is not a record, or a field with no ksqlDB type, is
    ksqlDB's ``Unable to verify ...``."""
    doc = json.loads(registered.schema)
    if not (isinstance(doc, dict) and doc.get("type") == "record"):
        raise _not_compatible(topic, schema_id, registered, "Schema returned from schema registry is anonymous "
                              "type. To use this schema with ksqlDB, set 'WRAP_SINGLE_VALUE=false' in the WITH "
                              "clause properties.", False, text)
    out = []
    for f in doc.get("fields", []):
        sql_type = serde.avro_sql_type(f["type"], original_names=True)
        if sql_type is None:
            raise _not_compatible(topic, schema_id, registered, f"Unsupported schema type for field "
                                  f"{f['name']}: {json.dumps(f['type'])}", False, text)
        out.append(ast.ColumnDef(str(f["name"]), sql_type))
    return tuple(out)


def key_columns(topic: str, schema_id: int, registered: "RegisteredSchema", text: str) -> tuple[ast.ColumnDef, ...]:
    """The key column ksqlDB infers from a key schema (unwrapped: ``ROWKEY`` of its type)."""
    t = serde.avro_sql_type(json.loads(registered.schema), original_names=True)
    if t is None:
        raise _not_compatible(topic, schema_id, registered, "the Avro type has no ksqlDB column type", True, text)
    column = ast.ColumnDef(avro_keys.ROWKEY, t, key=True)
    refused = serde.key_refusal([column])
    if refused is not None:
        raise KsqlError(refused, statement=text)
    return (column,)


def check_columns(query: "list[tuple[str, ast.SqlType | None]]", inferred: tuple[ast.ColumnDef, ...],
                  is_key: bool, text: str) -> None:
    """``DefaultSchemaInjector.checkColumnsCompatibility`` for a CREATE ... AS SELECT given a
    schema id: each of the query's columns (name, type) must be the schema's column at the same
    position, same name and type (a type only Spark knows, None, by name only), else ksqlDB's
    ``The following value columns are changed, missing or reordered: [...]``."""
    from kafkalite.sql.values import ksql_type_name

    def shown(name: str, t: ast.SqlType | None) -> str:
        return f"`{name}` {'?' if t is None else ksql_type_name(t)}" + (" KEY" if is_key else "")

    def same(i: int, name: str, t: ast.SqlType | None) -> bool:
        return i < len(inferred) and inferred[i].name == name and (
            t is None or ksql_type_name(inferred[i].type) == ksql_type_name(t))
    changed = [shown(n, t) for i, (n, t) in enumerate(query) if not same(i, n, t)]
    if changed:
        raise KsqlError(f"The following {'key' if is_key else 'value'} columns are changed, missing or reordered: "
                        f"[{', '.join(changed)}]. Schema from schema registry is "
                        f"[{', '.join(shown(c.name, c.type) for c in inferred)}]", statement=text)


def registration_error(exc: "RegistryClientError | ValueError") -> str:
    """ksqlDB's message for a schema the registry refused: ``SchemaRegistryUtil.registerSchema``'s
    KsqlException around the client's ``RestClientException`` (message; error code), wrapped
    again by the injector, so the prefix appears twice as in ksqlDB."""
    code = getattr(exc, "error_code", -1)
    cause = f"{exc}; error code: {code}" if code and code > 0 else str(exc)
    return f"Could not register schema for topic: Could not register schema for topic: {cause}"


def register_raw(registry_url: str, topic: str, schema_id: int, registered: "RegisteredSchema", is_key: bool,
                 text: str) -> None:
    """``SchemaRegisterInjector.registerRawSchema``: the schema the id names registered under the
    topic's subject (the registry answers the same id for a schema it knows), refused if the
    subject's compatibility rejects it or the registry answers another id."""
    from kafkalite.registry.client import RegistryClient, RegistryClientError

    name = subject(topic, is_key)
    try:
        got = RegistryClient(registry_url).register(name, registered.schema, registered.schema_type,
                                                    registered.references or None)
    except RegistryClientError as exc:
        raise KsqlError(registration_error(exc), statement=text) from None
    if got != schema_id:
        prop, _, _ = _side(is_key)
        raise KsqlError(f"Schema id registered is {got} which is different from provided {prop} {schema_id}.\n"
                        f"Topic: {topic}\nSubject: {name}\nSchema: {registered.schema}", statement=text)


def version_of(registry_url: str, topic: str, schema_id: int, is_key: bool, text: str) -> int:
    """The version of the topic's subject that holds ``schema_id`` (the newest such), or
    ksqlDB's not-found message if the subject no longer has it (it was deleted since)."""
    from kafkalite.registry.client import RegistryClient, RegistryClientError

    client = RegistryClient(registry_url)
    try:
        for version in sorted(client.versions(subject(topic, is_key)), reverse=True):
            if int(client.version_document(subject(topic, is_key), version)["id"]) == schema_id:
                return version
    except RegistryClientError:
        pass
    raise KsqlError(not_found(topic, schema_id, is_key), statement=text)
