"""Schema registry pages: subjects, a subject's versions and text, a diff, the compatibility check
shown before registering a new version."""
from __future__ import annotations

from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..services.schemas import SchemasService
from ..web import action, blocking, field, flash, int_field, redirect, render

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def subject_url(subject: str) -> str:
    """Subjects are any string (a ``/`` included), so they travel as a query parameter."""
    return f"/subject?name={quote(subject, safe='')}"


def routes(service: SchemasService) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        subjects = await blocking(service.subjects)
        return render(request, "schemas.html", {"title": "Schemas", "subjects": subjects, "types": SCHEMA_TYPES})

    async def subject(request: Request) -> Response:
        name = request.query_params.get("name")
        if name is None:
            raise ValueError("which subject? (?name=...)")
        view = await blocking(service.subject, name, request.query_params.get("version", "latest"))
        diff = None
        old, new = int_field(request.query_params, "old"), int_field(request.query_params, "new")
        if old is not None and new is not None:
            diff = await blocking(service.diff, name, old, new)
        return render(request, "subject.html", {"title": f"Subject {name}", "v": view, "diff": diff, "old": old,
                                                "new": new, "types": SCHEMA_TYPES})

    async def register(request: Request, form: FormData) -> Response:
        """Check first (the page shows the registry's verdict); register only once confirmed."""
        name = field(form, "subject").strip()
        schema, schema_type = field(form, "schema"), field(form, "schema_type", "AVRO") or "AVRO"
        if not name or not schema.strip():
            raise ValueError("give a subject and a schema")
        check = await blocking(service.check, name, schema, schema_type)
        if not field(form, "confirm") or not check.compatible:
            return render(request, "schema_check.html", {"title": f"Register a version of {name}", "subject": name,
                                                         "schema": schema, "schema_type": schema_type, "check": check})
        schema_id = await blocking(service.register, name, schema, schema_type)
        flash(request, f"schema registered under {name} with id {schema_id}")
        return redirect(subject_url(name))

    return [Route("/schemas", listing, name="schemas"), action("/schemas/register", register),
            Route("/subject", subject, name="subject")]
