"""Live charts from the brokers' /metrics: the page, and the fragment htmx polls."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..charts import multi_line_chart
from ..services.metrics import MetricsService
from ..web import blocking, render


def routes(service: MetricsService) -> list[BaseRoute]:
    def charts() -> dict:
        return {title: multi_line_chart(series, title) for title, series in service.charts().items()}

    async def page(request: Request) -> Response:
        if service.configured and request.query_params.get("scrape") == "1":
            await blocking(service.scrape)
        return render(request, "metrics.html", {"title": "Metrics", "configured": service.configured,
                                                "charts": charts(), "errors": dict(service.errors)})

    async def fragment(request: Request) -> Response:
        return render(request, "metrics_charts.html", {"charts": charts(), "errors": dict(service.errors)}, partial=True)

    return [Route("/metrics", page, name="metrics"), Route("/metrics/charts", fragment)]
