"""GET / : the overview page."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..services.overview import OverviewService
from ..web import blocking, render


def routes(service: OverviewService) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        return render(request, "overview.html", {"title": "Overview", "o": await blocking(service.overview)})

    return [Route("/", page, name="overview")]
