"""Schema registry pages: subjects, versions, a version's text, a diff between two versions, the
compatibility level, and registering a new version after showing the registry's own check."""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from kafkalite.registry.client import RegistryClient, RegistryClientError

from ..context import ConsoleContext


class RegistryNotConfigured(RegistryClientError):
    def __init__(self) -> None:
        super().__init__("no schema registry is configured (start the console with --registry-url)")


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str

    @property
    def pretty(self) -> str:
        """The schema text indented (JSON-based types), so that diffs compare line by line."""
        if self.schema_type in ("AVRO", "JSON"):
            try:
                return json.dumps(json.loads(self.schema), indent=2)
            except ValueError:
                pass
        return self.schema


@dataclass(frozen=True)
class SubjectView:
    subject: str
    versions: list[int]
    level: str
    shown: SchemaVersion


@dataclass(frozen=True)
class CompatibilityCheck:
    compatible: bool
    messages: list[str]
    level: str


def unified_diff(old: SchemaVersion, new: SchemaVersion) -> list[str]:
    return list(difflib.unified_diff(old.pretty.splitlines(), new.pretty.splitlines(),
                                     f"{old.subject} v{old.version}", f"{new.subject} v{new.version}", lineterm=""))


class SchemasService:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    @property
    def registry(self) -> RegistryClient:
        if self.context.registry is None:
            raise RegistryNotConfigured()
        return self.context.registry

    def subjects(self) -> list[tuple[str, int, str]]:
        """(subject, latest version, schema type) of every subject."""
        out = []
        for subject in sorted(self.registry.subjects()):
            doc = self.registry.version_document(subject, "latest")
            out.append((subject, int(doc["version"]), str(doc.get("schemaType") or "AVRO")))
        return out

    def version(self, subject: str, version: str | int = "latest") -> SchemaVersion:
        doc = self.registry.version_document(subject, version)
        return SchemaVersion(subject, int(doc["version"]), int(doc["id"]), str(doc.get("schemaType") or "AVRO"),
                             str(doc["schema"]))

    def subject(self, subject: str, version: str | int = "latest") -> SubjectView:
        return SubjectView(subject, self.registry.versions(subject), self.registry.compatibility_level(subject),
                           self.version(subject, version))

    def diff(self, subject: str, old: int, new: int) -> list[str]:
        return unified_diff(self.version(subject, old), self.version(subject, new))

    def check(self, subject: str, schema: str, schema_type: str = "AVRO") -> CompatibilityCheck:
        """The registry's verdict on ``schema`` as a next version (a new subject is always compatible)."""
        level = self.registry.compatibility_level(subject)
        try:
            ok, messages = self.registry.test_compatibility(subject, schema, schema_type)
        except RegistryClientError as exc:
            if exc.error_code in (40401, 40402):        # subject or version not found: the first version
                return CompatibilityCheck(True, [], level)
            raise
        return CompatibilityCheck(ok, messages, level)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        return self.registry.register(subject, schema, schema_type)
