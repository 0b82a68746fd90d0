"""ACLs (list, create, delete) and client quotas."""
from __future__ import annotations

from starlette.datastructures import FormData

from kafkalite.security.acl import AclBinding
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..services.scram_users import MECHANISMS, ScramUsersService
from ..services.security import (OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES, SecurityService,
                                 binding_from_form)
from ..web import action, blocking, field, flash, int_field, redirect, render


def _binding(form: FormData) -> AclBinding:
    return binding_from_form(field(form, "resource_type"), field(form, "name").strip(), field(form, "pattern_type"),
                             field(form, "principal").strip(), field(form, "host").strip() or "*",
                             field(form, "operation"), field(form, "permission"))


def routes(service: SecurityService, users: ScramUsersService) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        scram = await blocking(users.users) if users.configured else None
        return render(request, "security.html", {"title": "Security", "v": await blocking(service.view),
                                                 "resource_types": RESOURCE_TYPES, "operations": OPERATIONS,
                                                 "pattern_types": PATTERN_TYPES, "permissions": PERMISSIONS,
                                                 "scram_users": scram, "mechanisms": MECHANISMS})

    async def set_password(request: Request, form: FormData) -> Response:
        user, mechanism = field(form, "user").strip(), field(form, "mechanism")
        await blocking(users.set_password, user, mechanism, field(form, "password"),
                       int_field(form, "iterations", 4096) or 4096)
        flash(request, f"{mechanism} credential of user {user} set")
        return redirect("/security#scram")

    async def delete_user(request: Request, form: FormData) -> Response:
        user, mechanism = field(form, "user"), field(form, "mechanism")
        await blocking(users.delete, user, mechanism)
        flash(request, f"{mechanism} credential of user {user} deleted")
        return redirect("/security#scram")

    async def create(request: Request, form: FormData) -> Response:
        binding = _binding(form)
        await blocking(service.create, binding)
        flash(request, f"ACL created: {binding.entry.principal} {binding.entry.permission.pascal} "
                       f"{binding.entry.operation.pascal} on {binding.pattern.resource_type.pascal}:{binding.pattern.name}")
        return redirect("/security")

    async def delete(request: Request, form: FormData) -> Response:
        n = await blocking(service.delete, _binding(form))
        flash(request, f"{n} ACL(s) deleted")
        return redirect("/security")

    return [Route("/security", page, name="security"), action("/security/acls", create),
            action("/security/acls/delete", delete), action("/security/users", set_password),
            action("/security/users/delete", delete_user)]
