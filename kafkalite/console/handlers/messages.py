"""The message browser of a topic and its produce form."""
from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..decoding import FORMATS
from ..services.messages import STARTS, BrowseRequest, MessagesService, ProduceRequest
from ..web import action, blocking, field, flash, int_field, redirect, render
from .topics import topic_url


def browse_request(topic: str, q: dict[str, str]) -> BrowseRequest:
    return BrowseRequest(
        topic, int_field(q, "partition"), q.get("start", "end") or "end", int_field(q, "offset"),
        int_field(q, "timestamp"), int_field(q, "limit", 50) or 50, q.get("key_format", "auto"),
        q.get("value_format", "auto"), q.get("read_committed") == "1", q.get("search", ""), q.get("search_in", "any"),
        int_field(q, "window", 1000) or 1000)


def routes(service: MessagesService) -> list[BaseRoute]:
    async def browse(request: Request) -> Response:
        topic = request.path_params["name"]
        q = dict(request.query_params)
        req = browse_request(topic, q)
        result = await blocking(service.browse, req)
        return render(request, "messages.html", {"title": f"Messages of {topic}", "topic": topic, "req": req,
                                                 "result": result, "starts": STARTS, "formats": FORMATS})

    async def produce(request: Request, form: FormData) -> Response:
        topic = request.path_params["name"]
        req = ProduceRequest(topic, field(form, "value"), field(form, "key"), field(form, "headers"),
                             int_field(form, "partition"), field(form, "value_format", "text") or "text")
        partition, offset = await blocking(service.produce, req)
        flash(request, f"record written to {topic} partition {partition} at offset {offset}")
        return redirect(f"{topic_url(topic)}/messages?partition={partition}&start=offset&offset={offset}")

    return [Route("/topics/{name}/messages", browse, name="messages"), action("/topics/{name}/produce", produce)]
