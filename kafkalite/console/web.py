"""The web layer's shared parts: templates (Jinja2, autoescaping always on), the POST guard (CSRF
token and read-only mode), flash messages, and running blocking service calls off the event loop.

Every state-changing route is registered through :func:`action`: it refuses the POST in
read-only mode and unless the form (or the ``X-CSRF-Token`` header htmx sends) carries the
session's token, before the handler runs. The token lives in the signed session cookie
(Starlette's SessionMiddleware, SameSite=strict), one per browser session.
"""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

HERE = Path(__file__).resolve().parent
HTMX = "htmx-2.0.4.min.js"
T = TypeVar("T")

Handler = Callable[[Request], Awaitable[Response]]
ActionHandler = Callable[[Request, FormData], Awaitable[Response]]


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["bytes"] = human_bytes
    return Jinja2Templates(env=env)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not token:
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return str(token)


def flash(request: Request, message: str, kind: str = "ok") -> None:
    request.session.setdefault("flash", []).append([kind, message])


def render(request: Request, template: str, context: Mapping[str, Any], status_code: int = 200,
           partial: bool = False) -> HTMLResponse:
    """A page (or, ``partial``, a fragment htmx swaps in: it leaves the flash messages for the next page)."""
    state = request.app.state
    messages = [] if partial else request.session.pop("flash", [])
    ctx = {"request": request, "csrf": csrf_token(request), "read_only": state.settings.read_only,
           "user": getattr(request.state, "user", None),
           "settings": state.settings, "flashes": messages, "htmx": HTMX, **context}
    response = state.templates.TemplateResponse(request, template, ctx, status_code=status_code)
    response.headers["Content-Security-Policy"] = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                                                   "img-src 'self' data:; frame-ancestors 'none'")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


async def blocking(fn: Callable[..., T], *args: Any) -> T:
    """A blocking client call in Starlette's thread pool, never on the event loop."""
    return await run_in_threadpool(fn, *args)


def action(path: str, handler: ActionHandler, *, changes_cluster: bool = True) -> Route:
    """A POST route behind the guard: read-only mode refuses it (unless it ``changes_cluster`` not,
    as logging in), a missing or wrong CSRF token always."""
    async def guarded(request: Request) -> Response:
        if changes_cluster and request.app.state.settings.read_only:
            return PlainTextResponse("the console is read-only (--read-only)", status_code=403)
        form = await request.form()
        sent = request.headers.get("x-csrf-token") or form.get("csrf_token")
        expected = request.session.get("csrf")
        if not expected or not isinstance(sent, str) or not secrets.compare_digest(sent, str(expected)):
            return PlainTextResponse("missing or invalid CSRF token: reload the page and try again", status_code=403)
        return await handler(request, form)

    guarded.guarded = True  # type: ignore[attr-defined]
    return Route(path, guarded, methods=["POST"])


def field(form: FormData, name: str, default: str = "") -> str:
    value = form.get(name)
    return value if isinstance(value, str) else default


def int_field(form: Mapping[str, Any], name: str, default: int | None = None) -> int | None:
    raw = form.get(name)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {str(raw)[:40]!r}") from None
