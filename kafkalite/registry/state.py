"""The registry's in-memory state, built only by replaying ``_schemas`` records: pure, no I/O.

Every instance holds the same state because every instance replays the same compacted topic;
the primary changes it only by writing records and waiting until its own replay has applied
them (one path for live changes and recovery, as Kafka's group coordinator does).

Schema ids: ``max_id`` is the largest id any record ever showed this process (tombstoned and
deleted ones included) and never goes down, so a new schema always gets an id no schema ever had
here. ``id_by_identity`` maps a schema (type, canonical text, references) to its id, so the same
schema registered again, under any subject, gets the same id.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Iterator

from . import records as rec
from .compatibility import DEFAULT_LEVEL, parse_level
from .schemas import AVRO, Reference

log = logging.getLogger(__name__)

READWRITE, READONLY, IMPORT, FORWARD = "READWRITE", "READONLY", "IMPORT", "FORWARD"
MODES = (READWRITE, READONLY, IMPORT, FORWARD)

Identity = tuple[str, str, tuple[Reference, ...]]


@dataclass(frozen=True)
class SchemaVersion:
    """One version of one subject."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    deleted: bool

    def identity(self) -> Identity:
        return (self.schema_type, self.schema, self.references)

    def to_json(self) -> dict[str, Any]:
        """The REST form (Confluent's ``Schema`` entity: schemaType only when not AVRO)."""
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        return out


def parse_references(value: Any) -> tuple[Reference, ...]:
    """References from a record or request; ValueError when malformed."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError("references must be a list")
    out = []
    for r in value:
        if (not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("subject"), str)
                or not isinstance(r.get("version"), int) or isinstance(r.get("version"), bool)):
            raise ValueError(f"invalid reference {r!r}: needs name, subject and version")
        out.append(Reference(r["name"], r["subject"], r["version"]))
    return tuple(out)


class RegistryState:
    """Subjects, versions, ids, configs and modes, as the replayed records say."""

    def __init__(self, default_level: str = DEFAULT_LEVEL, default_mode: str = READWRITE) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.default_level = default_level
        self.default_mode = default_mode
        self.max_id = 0
        self.id_by_identity: dict[Identity, int] = {}
        self.schema_by_id: dict[int, SchemaVersion] = {}     # first version seen with each id
        self.applied_offset = -1                              # offset of the last record applied

    # -- replay -----------------------------------------------------------------------------
    def apply_raw(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """Apply one ``_schemas`` record; an unreadable one is logged and skipped, never fatal."""
        try:
            self.apply(rec.decode_key(key), rec.decode_value(value))
        except (rec.RecordError, ValueError, TypeError, KeyError) as exc:
            log.warning("skipping _schemas record at offset %d: %s", offset, exc)
        self.applied_offset = max(self.applied_offset, offset)

    def apply(self, key: rec.Key, value: dict[str, Any] | None) -> None:
        if key.keytype == rec.SCHEMA:
            self._apply_schema(key, value)
        elif key.keytype == rec.CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                level = parse_level(value.get("compatibilityLevel"))
                if level is None and "compatibilityLevel" in value:
                    raise ValueError(f"unknown compatibility level {value.get('compatibilityLevel')!r}")
                self.configs[key.subject] = {k: v for k, v in value.items() if k != "subject"}
        elif key.keytype == rec.MODE:
            if value is None:
                self.modes.pop(key.subject, None)
            else:
                mode = str(value.get("mode", "")).upper()
                if mode not in MODES:
                    raise ValueError(f"unknown mode {value.get('mode')!r}")
                self.modes[key.subject] = mode
        elif key.keytype == rec.DELETE_SUBJECT and value is not None:
            upto = value.get("version")
            versions = self.subjects.get(key.subject or "", {})
            for v, sv in list(versions.items()):
                if upto is None or v <= upto:
                    versions[v] = replace(sv, deleted=True)

    def _apply_schema(self, key: rec.Key, value: dict[str, Any] | None) -> None:
        subject, version = key.subject or "", key.version or 0
        if value is None:                       # permanent delete
            versions = self.subjects.get(subject)
            if versions is not None:
                versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
            return
        schema_id = value["id"]
        if not isinstance(schema_id, int) or not isinstance(value.get("schema"), str):
            raise ValueError(f"bad SCHEMA value for {subject} v{version}")
        sv = SchemaVersion(subject, version, schema_id, str(value.get("schemaType") or AVRO).upper(),
                           value["schema"], parse_references(value.get("references")), bool(value.get("deleted")))
        self.subjects.setdefault(subject, {})[version] = sv
        self.max_id = max(self.max_id, schema_id)
        known = self.id_by_identity.setdefault(sv.identity(), schema_id)
        if known != schema_id:
            # Imported ids (IMPORT mode) may give one schema two ids; lookups keep the first.
            log.info("schema of %s v%d has id %d, also known as id %d", subject, version, schema_id, known)
        first = self.schema_by_id.setdefault(schema_id, sv)
        if first.identity() != sv.identity():
            log.error("_schemas holds two different schemas with id %d (%s v%d and %s v%d)", schema_id,
                      first.subject, first.version, subject, version)

    # -- queries ----------------------------------------------------------------------------
    def versions(self, subject: str, include_deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first."""
        return [sv for _, sv in sorted(self.subjects.get(subject, {}).items())
                if include_deleted or not sv.deleted]

    def has_subject(self, subject: str, include_deleted: bool = False) -> bool:
        return bool(self.versions(subject, include_deleted))

    def subject_names(self, include_deleted: bool = False, deleted_only: bool = False, prefix: str = "") -> list[str]:
        out = []
        for subject in sorted(self.subjects):
            if not subject.startswith(prefix):
                continue
            live = self.has_subject(subject)
            if deleted_only:
                if not live and self.has_subject(subject, True):
                    out.append(subject)
            elif live or (include_deleted and self.has_subject(subject, True)):
                out.append(subject)
        return out

    def latest(self, subject: str, include_deleted: bool = False) -> SchemaVersion | None:
        vs = self.versions(subject, include_deleted)
        return vs[-1] if vs else None

    def get_version(self, subject: str, version: int, include_deleted: bool = False) -> SchemaVersion | None:
        sv = self.subjects.get(subject, {}).get(version)
        if sv is None or (sv.deleted and not include_deleted):
            return None
        return sv

    def schema_by_id_live(self, schema_id: int) -> SchemaVersion | None:
        """A version carrying ``schema_id`` (deleted versions count: their data still decodes)."""
        for versions in self.subjects.values():
            for sv in versions.values():
                if sv.id == schema_id:
                    return sv
        return None

    def all_versions(self) -> Iterator[SchemaVersion]:
        for subject in sorted(self.subjects):
            yield from self.versions(subject, True)

    def versions_of_id(self, schema_id: int, include_deleted: bool = False) -> list[SchemaVersion]:
        return [sv for sv in self.all_versions() if sv.id == schema_id and (include_deleted or not sv.deleted)]

    def referenced_by(self, subject: str, version: int, include_deleted: bool = False) -> list[SchemaVersion]:
        """Versions whose references name ``subject`` ``version``."""
        return [sv for sv in self.all_versions()
                if (include_deleted or not sv.deleted)
                and any(r.subject == subject and r.version == version for r in sv.references)]

    def level(self, subject: str | None) -> str:
        """The compatibility level in force for ``subject`` (its own, else the global one)."""
        for scope in ((subject, None) if subject is not None else (None,)):
            cfg = self.configs.get(scope)
            if cfg and parse_level(cfg.get("compatibilityLevel")):
                return parse_level(cfg["compatibilityLevel"]) or self.default_level
        return self.default_level

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, self.default_mode)
