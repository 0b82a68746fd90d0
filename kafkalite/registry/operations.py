"""What each REST operation means, as pure functions of the state.

Reads return the answer. Writes return ``(answer, records)``: the records to append to
``_schemas``; the answer holds once they are replayed (the service appends them and waits for its
own replay before answering). Nothing here does I/O, so the REST handlers and these rules are
tested in memory. Behaviour follows Confluent's ``KafkaSchemaRegistry`` (register, lookup,
soft/hard deletes with their preconditions, configs and modes); errors are
:mod:`kafkalite.registry.errors`.
"""
from __future__ import annotations

from typing import Any

from . import compatibility, errors
from . import records as rec
from .schemas import Dependency, ParsedSchema, Reference, SchemaError, parse, schema_type_of
from .state import IMPORT, MODES, READONLY, RegistryState, SchemaVersion, parse_references

LATEST = -1
MAX_VERSION = 2 ** 31 - 1
Records = list[rec.Record]


# -- arguments ----------------------------------------------------------------------------------
def check_subject(subject: str) -> str:
    if not subject or any(ord(c) < 32 for c in subject) or subject in ("__GLOBAL", "__EMPTY"):
        raise errors.invalid_subject(subject)
    return subject


def parse_version(text: str) -> int:
    """``latest``/-1 -> LATEST, else 1..2^31-1 (42202 otherwise)."""
    if text.lower() == "latest":
        return LATEST
    try:
        value = int(text, 10)
    except ValueError:
        raise errors.invalid_version(text) from None
    if value == -1:
        return LATEST
    if value < 1 or value > MAX_VERSION:
        raise errors.invalid_version(text)
    return value


def find_version(state: RegistryState, subject: str, version_text: str, include_deleted: bool = False
                 ) -> SchemaVersion:
    """The version named in a path: 40401 no such subject, 40402 no such version, 42202 bad text."""
    version = parse_version(version_text)
    sv = (state.latest(subject, include_deleted) if version == LATEST
          else state.get_version(subject, version, include_deleted))
    if sv is None:
        if not state.has_subject(subject, include_deleted):
            raise errors.subject_not_found(subject)
        raise errors.version_not_found(version_text if version == LATEST else version)
    return sv


def _dependencies(state: RegistryState, refs: tuple[Reference, ...], depth: int = 0) -> tuple[Dependency, ...]:
    if depth > 32:
        raise errors.invalid_schema("Invalid schema: references nest deeper than 32 levels (a cycle?)")
    out = []
    for ref in refs:
        sv = state.get_version(ref.subject, ref.version, include_deleted=True) if ref.version != LATEST else \
            state.latest(ref.subject)
        if sv is None:
            raise errors.invalid_schema(f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} "
                                        f"version {ref.version}, which does not exist")
        out.append(Dependency(Reference(ref.name, ref.subject, sv.version), sv.schema_type, sv.schema,
                              _dependencies(state, sv.references, depth + 1)))
    return tuple(out)


def parse_stored(state: RegistryState, sv: SchemaVersion) -> ParsedSchema:
    """A stored version, parsed with its references (for compatibility checks)."""
    try:
        return parse(sv.schema_type, sv.schema, _dependencies(state, sv.references))
    except SchemaError as exc:
        raise errors.store_error(f"Stored schema {sv.subject} v{sv.version} cannot be parsed: {exc}") from None


def parse_request(state: RegistryState, body: Any, normalize: bool) -> ParsedSchema:
    """The schema of a register/lookup/compatibility request body, parsed (42201/422 on bad input)."""
    if not isinstance(body, dict):
        raise errors.unprocessable("Request body must be a JSON object")
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise errors.invalid_schema("Invalid schema: the request has no \"schema\" string")
    try:
        schema_type = schema_type_of(body.get("schemaType"))
        refs = parse_references(body.get("references"))
    except SchemaError as exc:
        raise errors.invalid_schema(str(exc)) from None
    except ValueError as exc:
        raise errors.invalid_schema(f"Invalid schema: {exc}") from None
    try:
        return parse(schema_type, schema, _dependencies(state, refs), normalize=normalize)
    except SchemaError as exc:
        raise errors.invalid_schema(str(exc)) from None


# -- reads ----------------------------------------------------------------------------------------
def lookup(state: RegistryState, subject: str, body: Any, normalize: bool, include_deleted: bool) -> dict[str, Any]:
    """POST /subjects/{subject}: the version of ``subject`` holding this schema."""
    if not state.has_subject(subject, include_deleted):
        raise errors.subject_not_found(subject)
    parsed = parse_request(state, body, normalize)
    for sv in reversed(state.versions(subject, include_deleted)):
        if sv.identity() == parsed.identity():
            return sv.to_json()
    raise errors.schema_not_found()


def check_compatibility(state: RegistryState, subject: str, version_text: str | None, body: Any,
                        normalize: bool, verbose: bool) -> dict[str, Any]:
    """POST /compatibility/subjects/{subject}/versions[/{version}]."""
    parsed = parse_request(state, body, normalize)
    level = state.level(subject)
    if version_text is None:
        previous = [(sv.version, parse_stored(state, sv)) for sv in state.versions(subject)]
        messages = compatibility.check(level, parsed, previous)
    else:
        sv = find_version(state, subject, version_text)
        # one given version: the level's direction(s), never transitive
        base = level.replace("_TRANSITIVE", "")
        messages = compatibility.check(base, parsed, [(sv.version, parse_stored(state, sv))])
        if messages:
            messages[-1] = f"{{compatibility: '{level}'}}"
    out: dict[str, Any] = {"is_compatible": not messages}
    if verbose:
        out["messages"] = messages
    return out


# -- writes ---------------------------------------------------------------------------------------
def register(state: RegistryState, subject: str, body: Any, normalize: bool) -> tuple[dict[str, Any], Records]:
    """POST /subjects/{subject}/versions: ``{"id": ...}`` and the SCHEMA record(s) to write."""
    check_subject(subject)
    mode = state.mode(subject)
    if mode == READONLY:
        raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
    parsed = parse_request(state, body, normalize)
    want_id = body.get("id") if isinstance(body.get("id"), int) and body.get("id", -1) >= 0 else None
    want_version = body.get("version") if isinstance(body.get("version"), int) and body.get("version", 0) > 0 else None
    if (want_id is not None or want_version is not None) and mode != IMPORT:
        raise errors.operation_not_permitted("Overriding the schema id or version is only permitted in IMPORT mode")

    all_versions = state.versions(subject, include_deleted=True)
    live = [sv for sv in all_versions if not sv.deleted]
    # already registered under this subject: the same answer again
    if want_version is None:
        for sv in reversed(live):
            if sv.identity() == parsed.identity() and (want_id is None or want_id == sv.id):
                return {"id": sv.id, "version": sv.version}, []

    if mode != IMPORT:
        level = state.level(subject)
        messages = compatibility.check(level, parsed, [(sv.version, parse_stored(state, sv)) for sv in live])
        if messages:
            raise errors.incompatible(subject, messages)

    new_version = max([sv.version for sv in all_versions], default=0) + 1
    if want_version is not None:
        if state.get_version(subject, want_version, include_deleted=True) is not None:
            raise errors.invalid_schema(f"Invalid schema: version {want_version} of {subject} already exists")
        new_version = want_version
    if want_id is not None:
        other = state.schema_by_id.get(want_id)
        if other is not None and other.identity() != parsed.identity():
            raise errors.id_does_not_match(f"Schema already registered with id {want_id} instead of input id")
        schema_id = want_id
    else:
        schema_id = state.id_by_identity.get(parsed.identity(), 0) or state.max_id + 1

    refs = [r.to_json() for r in parsed.references]
    out: Records = []
    # a soft-deleted earlier version with the same id is superseded by this one (Confluent's tidy-up)
    for sv in all_versions:
        if sv.deleted and sv.id == schema_id and sv.version < new_version and not state.referenced_by(
                subject, sv.version, include_deleted=True):
            out.append(rec.Record(rec.Key(rec.SCHEMA, subject, sv.version), None))
    value = rec.schema_value(subject, new_version, schema_id, parsed.schema_type, parsed.canonical, refs, False)
    out.append(rec.Record(rec.Key(rec.SCHEMA, subject, new_version), value))
    return {"id": schema_id, "version": new_version}, out


def delete_version(state: RegistryState, subject: str, version_text: str, permanent: bool) -> tuple[int, Records]:
    """DELETE /subjects/{subject}/versions/{version}[?permanent=true]."""
    if state.mode(subject) == READONLY:
        raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
    version = parse_version(version_text)
    if not state.has_subject(subject, include_deleted=True):
        raise errors.subject_not_found(subject)
    if version == LATEST:
        sv = state.latest(subject, include_deleted=permanent)
    else:
        sv = state.get_version(subject, version, include_deleted=True)
    if sv is None:
        raise errors.version_not_found(version_text if version == LATEST else version)
    if not permanent and sv.deleted:
        raise errors.version_soft_deleted(subject, sv.version)
    if permanent and not sv.deleted:
        raise errors.version_not_soft_deleted(subject, sv.version)
    if state.referenced_by(subject, sv.version, include_deleted=permanent):
        raise errors.reference_exists(f"{{magic=1,keytype=SCHEMA,subject={subject},version={sv.version}}}")
    key = rec.Key(rec.SCHEMA, subject, sv.version)
    if not permanent:
        refs = [r.to_json() for r in sv.references]
        return sv.version, [rec.Record(key, rec.schema_value(subject, sv.version, sv.id, sv.schema_type, sv.schema,
                                                              refs, True))]
    out = [rec.Record(key, None)]
    if len(state.versions(subject, include_deleted=True)) == 1:      # the subject goes with its last version
        out.extend(_subject_settings_tombstones(state, subject))
    return sv.version, out


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> tuple[list[int], Records]:
    """DELETE /subjects/{subject}[?permanent=true]: the versions deleted."""
    if not state.has_subject(subject, include_deleted=True):
        raise errors.subject_not_found(subject)
    if state.mode(subject) == READONLY:
        raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
    if not permanent and not state.has_subject(subject):
        raise errors.subject_soft_deleted(subject)
    versions = state.versions(subject, include_deleted=permanent)
    for sv in versions:
        if any(r.subject != subject for r in state.referenced_by(subject, sv.version, include_deleted=permanent)):
            raise errors.reference_exists(f"{{magic=1,keytype=SCHEMA,subject={subject},version={sv.version}}}")
        if permanent and not sv.deleted:
            raise errors.subject_not_soft_deleted(subject)
    numbers = [sv.version for sv in versions]
    if not permanent:
        return numbers, [rec.Record(rec.Key(rec.DELETE_SUBJECT, subject),
                                    {"subject": subject, "version": numbers[-1]})]
    out = [rec.Record(rec.Key(rec.SCHEMA, subject, v), None) for v in reversed(numbers)]
    out.extend(_subject_settings_tombstones(state, subject))
    return numbers, out


def _subject_settings_tombstones(state: RegistryState, subject: str) -> Records:
    out = []
    if subject in state.configs:
        out.append(rec.Record(rec.Key(rec.CONFIG, subject), None))
    if subject in state.modes:
        out.append(rec.Record(rec.Key(rec.MODE, subject), None))
    return out


def get_config(state: RegistryState, subject: str | None, default_to_global: bool) -> dict[str, Any]:
    if subject is None:
        return {"compatibilityLevel": state.level(None), **_extra_config(state.configs.get(None))}
    cfg = state.configs.get(subject)
    if cfg and cfg.get("compatibilityLevel"):
        return {"compatibilityLevel": cfg["compatibilityLevel"], **_extra_config(cfg)}
    if default_to_global:
        return get_config(state, None, False)
    raise errors.subject_compatibility_not_configured(subject)


def _extra_config(cfg: dict[str, Any] | None) -> dict[str, Any]:
    return {"normalize": cfg["normalize"]} if cfg and isinstance(cfg.get("normalize"), bool) else {}


def set_config(state: RegistryState, subject: str | None, body: Any) -> tuple[dict[str, Any], Records]:
    """PUT /config[/{subject}] with ``{"compatibility": LEVEL}`` (or ``compatibilityLevel``)."""
    if subject is not None:
        check_subject(subject)
    if not isinstance(body, dict):
        raise errors.unprocessable("Request body must be a JSON object")
    raw = body.get("compatibility", body.get("compatibilityLevel"))
    level = compatibility.parse_level(raw)
    normalize = body.get("normalize")
    if level is None and not (raw is None and isinstance(normalize, bool)):
        raise errors.invalid_compatibility(raw)
    value: dict[str, Any] = dict(state.configs.get(subject) or {})
    if level is not None:
        value["compatibilityLevel"] = level
    if isinstance(normalize, bool):
        value["normalize"] = normalize
    if subject is not None:
        value["subject"] = subject
    answer: dict[str, Any] = {"compatibility": level or state.level(subject)}
    if isinstance(normalize, bool):
        answer["normalize"] = normalize
    return answer, [rec.Record(rec.Key(rec.CONFIG, subject), value)]


def delete_config(state: RegistryState, subject: str | None) -> tuple[dict[str, Any], Records]:
    """DELETE /config[/{subject}]: the config that was in force; the subject falls back to global."""
    if subject is None:
        return get_config(state, None, False), [rec.Record(rec.Key(rec.CONFIG, None), None)]
    previous = get_config(state, subject, False)          # 40408 when none
    return previous, [rec.Record(rec.Key(rec.CONFIG, subject), None)]


def get_mode(state: RegistryState, subject: str | None, default_to_global: bool) -> dict[str, Any]:
    if subject is None:
        return {"mode": state.mode(None)}
    if subject in state.modes:
        return {"mode": state.modes[subject]}
    if default_to_global:
        return {"mode": state.mode(None)}
    raise errors.subject_mode_not_configured(subject)


def set_mode(state: RegistryState, subject: str | None, body: Any, force: bool) -> tuple[dict[str, Any], Records]:
    """PUT /mode[/{subject}]: IMPORT needs an empty registry (or subject) unless ``force``."""
    if subject is not None:
        check_subject(subject)
    if not isinstance(body, dict):
        raise errors.unprocessable("Request body must be a JSON object")
    mode = body.get("mode")
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise errors.invalid_mode(mode)
    mode = mode.upper()
    if mode == IMPORT and not force:
        busy = state.has_subject(subject, True) if subject is not None else bool(state.subjects)
        if busy:
            raise errors.operation_not_permitted("Cannot import since found existing subjects")
    value: dict[str, Any] = {"mode": mode}
    if subject is not None:
        value["subject"] = subject
    return {"mode": mode}, [rec.Record(rec.Key(rec.MODE, subject), value)]


def delete_mode(state: RegistryState, subject: str) -> tuple[dict[str, Any], Records]:
    previous = get_mode(state, subject, False)               # 40409 when none
    return previous, [rec.Record(rec.Key(rec.MODE, subject), None)]
