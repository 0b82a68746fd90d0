"""Topic list (search, paging), topic page, and the topic actions (create, delete, add partitions,
set or remove a config override)."""
from __future__ import annotations

from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..services.metrics import MetricsService
from ..services.topics import TopicsService
from ..web import action, blocking, field, flash, int_field, redirect, render


def topic_url(name: str) -> str:
    return f"/topics/{quote(name, safe='')}"


def routes(service: TopicsService, metrics: MetricsService) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        q = request.query_params
        search = q.get("search", "")
        page = await blocking(service.page, search, int_field(q, "page", 1) or 1, int_field(q, "size", 50) or 50,
                              q.get("internal", "1") == "1")
        rates = metrics.topic_rates()
        return render(request, "topics.html", {"title": "Topics", "p": page, "search": search, "rates": rates})

    async def detail(request: Request) -> Response:
        name = request.path_params["name"]
        return render(request, "topic.html", {"title": f"Topic {name}", "t": await blocking(service.detail, name)})

    async def create(request: Request, form: FormData) -> Response:
        name = field(form, "name").strip()
        if not name:
            raise ValueError("give the topic a name")
        configs = {}
        for line in field(form, "configs").splitlines():
            if line.strip():
                key, sep, value = line.partition("=")
                if not sep:
                    raise ValueError(f"config line {line[:60]!r} is not key=value")
                configs[key.strip()] = value.strip()
        await blocking(service.create, name, int_field(form, "partitions", -1), int_field(form, "replication_factor", -1),
                       configs)
        flash(request, f"topic {name} created")
        return redirect(topic_url(name))

    async def delete(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]
        await blocking(service.delete, name)
        flash(request, f"topic {name} deleted")
        return redirect("/topics")

    async def add_partitions(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]
        total = int_field(form, "total")
        if total is None:
            raise ValueError("give the new total number of partitions")
        await blocking(service.add_partitions, name, total)
        flash(request, f"topic {name} now has {total} partitions")
        return redirect(topic_url(name))

    async def set_config(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]
        key = field(form, "key").strip()
        if not key:
            raise ValueError("give the config's name")
        value = None if field(form, "reset") else field(form, "value")
        await blocking(service.set_config, name, key, value)
        flash(request, f"{key} reset to its default" if value is None else f"{key} set to {value}")
        return redirect(topic_url(name) + "#configs")

    return [Route("/topics", listing, name="topics"), action("/topics", create),
            Route("/topics/{name}", detail, name="topic"), action("/topics/{name}/delete", delete),
            action("/topics/{name}/partitions", add_partitions), action("/topics/{name}/config", set_config)]
