"""``--user-login``: every request but the login page needs a live login, and runs as that person.

A pure ASGI middleware (inside the session middleware, whose cookie carries only the login's
random key): it looks the key up in :class:`~kafkalite.console.context.Logins` and serves the
request with the person's context active (:class:`~kafkalite.console.context.acting_as`), so
every broker call it makes carries that person's credentials. Without a login a page view is sent
to /login and a POST is refused (401).
"""
from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .context import LoginFailed, Logins, acting_as
from .web import action, blocking, field, redirect, render

OPEN_PATHS = ("/login",)
OPEN_PREFIXES = ("/static/",)


class PersonMiddleware:
    def __init__(self, app: ASGIApp, logins: Logins | None) -> None:
        self.app = app
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.logins is None:
            await self.app(scope, receive, send)
            return
        found = self.logins.lookup(scope.get("session", {}).get("login"))
        if found is None:
            path = scope["path"]
            if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
                await self.app(scope, receive, send)
                return
            response: Response = (RedirectResponse("/login", status_code=303) if scope["method"] == "GET"
                                  else PlainTextResponse("log in first", status_code=401))
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["user"] = found[0]
        with acting_as(found[1]):
            await self.app(scope, receive, send)


def routes(logins: Logins | None) -> list[BaseRoute]:
    if logins is None:
        return []

    async def page(request: Request) -> Response:
        return render(request, "login.html", {"title": "Log in", "error": ""})

    async def login(request: Request, form: FormData) -> Response:
        try:
            key = await blocking(logins.login, field(form, "username").strip(), field(form, "password"))
        except LoginFailed as exc:
            return render(request, "login.html", {"title": "Log in", "error": str(exc)}, status_code=401)
        logins.logout(request.session.get("login"))
        request.session["login"] = key
        return redirect("/")

    async def logout(request: Request, form: FormData) -> Response:
        await blocking(logins.logout, request.session.pop("login", None))
        return redirect("/login")

    return [Route("/login", page), action("/login", login, changes_cluster=False),
            action("/logout", logout, changes_cluster=False)]
