"""The Starlette application: services wired to the handlers, the session and error handling,
and the background samplers (consumer lag, broker metrics) that feed the live charts."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from kafkalite.client.errors import ClientError
from kafkalite.registry.client import RegistryClientError

from . import people
from .context import ConsoleContext, LoginFailed, Logins
from .decoding import Decoder
from .handlers import groups, messages, metrics, overview, schemas, security, services, topics
from .services.groups import GroupError, GroupNotFound, GroupsService
from .services.messages import BadRequest, MessagesService
from .services.metrics import MetricsService
from .services.overview import OverviewService
from .services.remote import ConnectService, RemoteError, SqlService
from .services.schemas import SchemasService
from .services.scram_users import ScramUserError, ScramUsersService
from .services.security import SecurityService
from .services.topics import TopicsService
from .settings import ConsoleSettings
from .web import HERE, blocking, make_templates, render

log = logging.getLogger(__name__)


@dataclass
class Services:
    overview: OverviewService
    topics: TopicsService
    messages: MessagesService
    groups: GroupsService
    schemas: SchemasService
    security: SecurityService
    scram_users: ScramUsersService
    metrics: MetricsService
    connect: ConnectService | None
    sql: SqlService | None


def build_services(context: ConsoleContext) -> Services:
    s = context.settings
    return Services(OverviewService(context), TopicsService(context), MessagesService(context, Decoder(context.registry)),
                    GroupsService(context), SchemasService(context), SecurityService(context),
                    ScramUsersService(s.zookeeper),
                    MetricsService(s.metrics_urls),
                    ConnectService(s.connect_url) if s.connect_url else None,
                    SqlService(s.sql_url) if s.sql_url else None)


async def _every(interval_s: float, job: Callable[[], Any], what: str) -> None:
    """Run a blocking ``job`` in the thread pool every ``interval_s`` until cancelled."""
    while True:
        try:
            await blocking(job)
        except (ClientError, RegistryClientError, RemoteError, OSError) as exc:
            log.info("%s sample failed: %s", what, exc)
        await asyncio.sleep(interval_s)


async def _client_error(request: Request, exc: Exception) -> Response:
    status = 400 if isinstance(exc, (BadRequest, GroupError, ValueError)) else 502
    if isinstance(exc, GroupNotFound) or isinstance(exc, ClientError) and exc.code in (3, 69):
        status = 404           # UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND
    if isinstance(exc, RegistryClientError) and exc.status in (404, 409, 422):
        status = exc.status
    return render(request, "error.html", {"title": "Error", "error": str(exc)}, status_code=status)


def create_app(settings: ConsoleSettings, *, context: ConsoleContext | None = None, samplers: bool = True,
               session_secret: str | None = None) -> Starlette:
    context = context or ConsoleContext(settings)
    svc = build_services(context)
    logins = Logins(context, settings.login_idle_s) if settings.user_login else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks = []
        if samplers and settings.lag_sample_interval_s > 0:
            tasks.append(asyncio.create_task(_every(settings.lag_sample_interval_s, svc.groups.sample_all, "lag")))
        if samplers and settings.metrics_urls and settings.metrics_interval_s > 0:
            tasks.append(asyncio.create_task(_every(settings.metrics_interval_s, svc.metrics.scrape, "metrics")))
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()
            if logins is not None:
                await blocking(logins.close_all)
            await blocking(context.close)

    routes: list[BaseRoute] = [
        *overview.routes(svc.overview), *topics.routes(svc.topics, svc.metrics), *messages.routes(svc.messages),
        *groups.routes(svc.groups), *schemas.routes(svc.schemas), *security.routes(svc.security, svc.scram_users),
        *metrics.routes(svc.metrics), *services.routes(svc.connect, svc.sql), *people.routes(logins),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(SessionMiddleware, secret_key=session_secret or secrets.token_urlsafe(32),
                             session_cookie="kafkalite_console", same_site="strict", https_only=False),
                  Middleware(people.PersonMiddleware, logins=logins)]
    errors: dict[Any, Any] = {ClientError: _client_error, RegistryClientError: _client_error,
                              BadRequest: _client_error, GroupError: _client_error, RemoteError: _client_error,
                              ScramUserError: _client_error, LoginFailed: _client_error,
                              ValueError: _client_error}
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=errors, lifespan=lifespan)
    app.state.settings = settings
    app.state.templates = make_templates()
    app.state.services = svc
    app.state.context = context
    return app
