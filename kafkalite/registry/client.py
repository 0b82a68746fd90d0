"""A small blocking client of the registry's REST API (any Confluent-compatible registry).

For the console tools and the Spark reader: register or look up a schema, fetch a schema
by id with its references resolved (each referenced subject/version fetched once). Errors are
:class:`RegistryClientError` carrying Confluent's ``error_code`` and message.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClientError(Exception):
    def __init__(self, message: str, error_code: int = -1, status: int = -1) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.status = status


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry stores it, with the referenced schemas (depth first) it needs."""

    schema_id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]] = field(default_factory=list)
    #: (reference name, schema text) of every referenced schema, dependencies first
    dependencies: list[tuple[str, str]] = field(default_factory=list)


class RegistryClient:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        first = url.split(",")[0].strip().rstrip("/")
        if not first.startswith(("http://", "https://")):
            raise RegistryClientError(f"schema.registry.url {url!r} is not an http:// URL")
        self.url = first
        self.timeout = timeout
        self._by_id: dict[int, RegisteredSchema] = {}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Accept": CONTENT_TYPE, **({"Content-Type": CONTENT_TYPE} if data else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                doc = json.loads(exc.read())
                raise RegistryClientError(str(doc.get("message")), int(doc.get("error_code", -1)), exc.code) from None
            except (ValueError, AttributeError, TypeError):
                raise RegistryClientError(f"HTTP {exc.code} from {self.url}{path}", -1, exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryClientError(f"cannot reach the schema registry at {self.url}: {reason}") from None
        except ValueError:
            raise RegistryClientError(f"the schema registry at {self.url} answered something that is not JSON") \
                from None

    @staticmethod
    def _quote(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        return int(self._call("POST", f"/subjects/{self._quote(subject)}/versions", body)["id"])

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: list[dict[str, Any]] | None = None) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        return int(self._call("POST", f"/subjects/{self._quote(subject)}", body)["id"])

    def delete_subject(self, subject: str) -> list[int]:
        """Soft-deletes every version of ``subject`` (``DELETE /subjects/{s}``); the versions deleted."""
        return [int(v) for v in self._call("DELETE", f"/subjects/{self._quote(subject)}")]

    # -- browsing (the console's schema pages) --------------------------------------------------
    def subjects(self) -> list[str]:
        return [str(s) for s in self._call("GET", "/subjects")]

    def versions(self, subject: str) -> list[int]:
        return [int(v) for v in self._call("GET", f"/subjects/{self._quote(subject)}/versions")]

    def version_document(self, subject: str, version: str | int = "latest") -> dict[str, Any]:
        """The registry's own JSON of one version: subject, version, id, schemaType, schema, references."""
        return dict(self._call("GET", f"/subjects/{self._quote(subject)}/versions/{self._quote(str(version))}"))

    def compatibility_level(self, subject: str | None = None) -> str:
        """The subject's level, falling back to the global one (``defaultToGlobal``), or the global level."""
        path = "/config" if subject is None else f"/config/{self._quote(subject)}?defaultToGlobal=true"
        return str(self._call("GET", path)["compatibilityLevel"])

    def test_compatibility(self, subject: str, schema: str, schema_type: str = "AVRO",
                           references: list[dict[str, Any]] | None = None) -> tuple[bool, list[str]]:
        """(compatible?, the registry's reasons) of ``schema`` against the subject's versions its
        level names (``POST /compatibility/subjects/{s}/versions?verbose=true``)."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        doc = self._call("POST", f"/compatibility/subjects/{self._quote(subject)}/versions?verbose=true", body)
        return bool(doc["is_compatible"]), [str(m) for m in doc.get("messages") or []]

    def latest(self, subject: str) -> RegisteredSchema:
        return self.subject_version(subject, "latest")[1]

    def subject_version(self, subject: str, version: str | int = "latest") -> tuple[int, RegisteredSchema]:
        """(version number, schema) of ``subject``'s ``version`` (a number or ``latest``)."""
        doc = self._call("GET", f"/subjects/{self._quote(subject)}/versions/{self._quote(str(version))}")
        return int(doc["version"]), self.by_id(int(doc["id"]))

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema with ``schema_id`` and its dependencies (cached: ids never change meaning)."""
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        doc = self._call("GET", f"/schemas/ids/{schema_id}")
        refs = list(doc.get("references") or [])
        deps: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()
        self._resolve(refs, deps, seen)
        out = RegisteredSchema(schema_id, doc.get("schemaType") or "AVRO", doc["schema"], refs, deps)
        self._by_id[schema_id] = out
        return out

    def _resolve(self, refs: list[dict[str, Any]], deps: list[tuple[str, str]], seen: set[tuple[str, int]],
                 depth: int = 0) -> None:
        if depth > 32:
            raise RegistryClientError("schema references nest deeper than 32 levels")
        for ref in refs:
            key = (ref["subject"], int(ref["version"]))
            if key in seen:
                continue
            seen.add(key)
            doc = self._call("GET", f"/subjects/{self._quote(ref['subject'])}/versions/{int(ref['version'])}")
            self._resolve(list(doc.get("references") or []), deps, seen, depth + 1)
            deps.append((ref["name"], doc["schema"]))
