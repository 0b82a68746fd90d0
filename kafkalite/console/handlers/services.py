"""Kafka Connect and the SQL server, when their URLs are configured."""
from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..services.remote import ConnectService, SqlService
from ..web import action, blocking, field, flash, int_field, redirect, render


def routes(connect: ConnectService | None, sql: SqlService | None) -> list[BaseRoute]:
    async def connectors(request: Request) -> Response:
        items = await blocking(connect.connectors) if connect else []
        return render(request, "connect.html", {"title": "Connect", "configured": connect is not None,
                                                "connectors": items})

    async def connector_action(request: Request, form: FormData) -> Response:
        if connect is None:
            raise ValueError("no Connect cluster is configured (--connect-url)")
        name, what = request.path_params["name"], request.path_params["action"]
        await blocking(connect.act, name, what)
        flash(request, f"connector {name}: {what} requested")
        return redirect("/connect")

    async def sql_page(request: Request) -> Response:
        return render(request, "sql.html", {"title": "SQL", "configured": sql is not None, "statement": "",
                                            "result": None})

    async def run(request: Request, form: FormData) -> Response:
        if sql is None:
            raise ValueError("no SQL server is configured (--sql-url)")
        statement = field(form, "statement")
        result = await blocking(sql.run, statement, int_field(form, "max_rows", 100) or 100)
        template = "sql_result.html" if request.headers.get("hx-request") else "sql.html"
        return render(request, template, {"title": "SQL", "configured": True, "statement": statement,
                                          "result": result}, partial=template == "sql_result.html")

    return [Route("/connect", connectors, name="connect"),
            action("/connect/{name}/{action}", connector_action),
            Route("/sql", sql_page, name="sql"), action("/sql", run)]
