"""Consumer groups: the list, a group's page (with its lag chart, refreshed by htmx), the offset
reset (a dry run shows the plan; the real one commits it) and deletion."""
from __future__ import annotations

from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..charts import line_chart
from ..services.groups import STRATEGIES, GroupsService
from ..web import action, blocking, field, flash, int_field, redirect, render


def group_url(group_id: str) -> str:
    """Group ids are any string (a ``/`` included), so they travel as a query parameter."""
    return f"/group?id={quote(group_id, safe='')}"


def _group_id(request: Request) -> str:
    gid = request.query_params.get("id")
    if gid is None:
        raise ValueError("which group? (?id=...)")
    return gid


def routes(service: GroupsService) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        return render(request, "groups.html", {"title": "Consumer groups", "groups": await blocking(service.groups)})

    async def detail(request: Request) -> Response:
        gid = _group_id(request)
        d = await blocking(service.detail, gid)
        return render(request, "group.html", {"title": f"Group {gid}", "d": d, "strategies": STRATEGIES,
                                              "chart": line_chart(service.history.series(gid), "total lag")})

    async def lag(request: Request) -> Response:
        gid = _group_id(request)
        d = await blocking(service.detail, gid)
        return render(request, "group_lag.html", {"d": d, "chart": line_chart(service.history.series(gid), "total lag")},
                      partial=True)

    async def reset(request: Request, form: FormData) -> Response:
        gid = field(form, "group_id")
        strategy = field(form, "strategy")
        topic = field(form, "topic").strip() or None
        value = int_field(form, "value")
        if field(form, "dry_run"):
            plan = await blocking(service.plan_reset, gid, strategy, topic, value)
            return render(request, "reset_plan.html", {"title": f"Reset {gid} (dry run)", "group_id": gid,
                                                       "plan": plan, "strategy": strategy, "topic": topic or "",
                                                       "value": "" if value is None else value})
        plan = await blocking(service.reset, gid, strategy, topic, value)
        flash(request, f"offsets of {len(plan)} partition(s) of group {gid} reset ({strategy})")
        return redirect(group_url(gid))

    async def delete(request: Request, form: FormData) -> Response:
        gid = field(form, "group_id")
        await blocking(service.delete, gid)
        flash(request, f"group {gid} deleted")
        return redirect("/groups")

    return [Route("/groups", listing, name="groups"), Route("/group", detail, name="group"),
            Route("/group/lag", lag), action("/group/reset", reset), action("/group/delete", delete)]
