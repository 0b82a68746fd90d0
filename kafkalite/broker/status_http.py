"""The broker's HTTP status endpoint (``metrics.port``): ``/metrics`` and ``/health``, on Twisted Web.

``/metrics`` is the Prometheus text exposition of :mod:`kafkalite.broker.metrics`; ``/health``
is JSON that says whether this broker is registered in ZooKeeper, its ZooKeeper session state
and its offline log dirs, answered 200 when all is well and 503 otherwise, so a load balancer,
an orchestrator's probe or an operator's curl can tell at once.

Both render synchronously on the reactor thread: the collector reads the broker's services,
which only the reactor thread may touch (prometheus_client's own Twisted resource would render
in the thread pool). Kafka has no such endpoint: it exposes JMX, which operators scrape through
the JMX exporter; this port is kafkalite's stand-in, with the exporter's metric names.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import CollectorRegistry
from twisted.web import http, resource, server

from kafkalite.broker.metrics import render
from kafkalite.config import BrokerConfig

log = logging.getLogger(__name__)


@dataclass
class Health:
    """What /health reports."""

    broker_id: int
    registered: bool                 # our /brokers/ids/<id> is there, from this session's registration
    zookeeper_session: str           # connected / suspended / lost / new_session / not started
    offline_log_dirs: list[str] = field(default_factory=list)
    controller: bool = False

    @property
    def healthy(self) -> bool:
        return self.registered and self.zookeeper_session in ("connected", "new_session") and not self.offline_log_dirs

    def problems(self) -> list[str]:
        out = []
        if not self.registered:
            out.append("not registered in ZooKeeper")
        if self.zookeeper_session not in ("connected", "new_session"):
            out.append(f"ZooKeeper session {self.zookeeper_session}")
        if self.offline_log_dirs:
            out.append(f"offline log dirs: {', '.join(self.offline_log_dirs)}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok" if self.healthy else "unhealthy", **asdict(self), "problems": self.problems()}


class StatusResource(resource.Resource):
    """One leaf for the whole port: /metrics, /health, and / (a pointer to both)."""

    isLeaf = True

    def __init__(self, registry: CollectorRegistry, health: Callable[[], Health]) -> None:
        super().__init__()
        self.registry = registry
        self.health = health

    def render_GET(self, request: server.Request) -> bytes:
        path = (request.path or b"/").rstrip(b"/") or b"/"
        if path == b"/metrics":
            request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
            return render(self.registry)
        if path == b"/health":
            state = self.health()
            request.setResponseCode(200 if state.healthy else 503)
            request.setHeader(b"Content-Type", b"application/json")
            return json.dumps(state.to_json()).encode() + b"\n"
        request.setHeader(b"Content-Type", b"text/plain; charset=utf-8")
        if path != b"/":
            request.setResponseCode(404)
            return b"not found: this port serves /metrics and /health\n"
        return b"kafkalite broker: /metrics (Prometheus text), /health (JSON)\n"


class _QuietSite(server.Site):
    """No access log line per request: a scraper calls every few seconds."""

    def log(self, request: http.Request) -> None:
        pass


def site(registry: CollectorRegistry, health: Callable[[], Health]) -> server.Site:
    factory = _QuietSite(StatusResource(registry, health))
    factory.displayTracebacks = False
    factory.noisy = False
    return factory


class StatusServer:
    """The ``metrics.port`` listener (0: off) with its /health answer: bound by the broker before
    it registers (so /health says 503 until registration is done), closed as the broker stops
    accepting. ``health`` builds the answer when asked (it reads the broker's live state)."""

    def __init__(self, config: BrokerConfig, reactor: Any, registry: CollectorRegistry,
                 health: Callable[[], Health]) -> None:
        self.config = config
        self.reactor = reactor
        self.registry = registry
        self.health = health
        self.port: Any = None              # the listening port once bound

    def listen(self) -> None:
        port = self.config["metrics.port"]
        if not port:
            return
        host = self.config["metrics.host"]
        if host is None:
            host = self.config.listeners[0].host
        self.port = self.reactor.listenTCP(port, site(self.registry, self.health), interface=host or "0.0.0.0")
        log.info("metrics and health on http://%s:%d/metrics, /health", host or "0.0.0.0", self.port.getHost().port)

    def stop(self) -> Any:
        """Stop listening (a Deferred, or None when the port was off)."""
        if self.port is None:
            return None
        return self.port.stopListening()
