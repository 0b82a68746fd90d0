"""Forwarding a write from a non-primary instance to the primary over HTTP (Twisted's Agent).

The request goes out as it came in (method, path and query, body, content type and accept), marked
with :data:`~kafkalite.registry.rest.FORWARDED_HEADER` so it is never forwarded twice; the
primary's answer comes back unchanged. A primary that cannot be reached is Confluent's 50003.
After a successful write the forwarding instance waits (bounded) until its own replay has caught
up with ``_schemas``, so the client's next read on this instance sees its write.
"""
from __future__ import annotations

import logging
from io import BytesIO
from typing import Any, Callable, cast

from twisted.internet import defer
from twisted.web.client import Agent, FileBodyProducer, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IBodyProducer
from twisted.web.server import Request

from . import errors
from .rest import FORWARDED_HEADER, Forwarded

log = logging.getLogger(__name__)


class Forwarder:
    def __init__(self, reactor: Any, catch_up: Callable[[], defer.Deferred[None]], timeout: float = 30.0) -> None:
        self.reactor = reactor
        self.agent = Agent(reactor, connectTimeout=min(timeout, 10.0))
        self.catch_up = catch_up
        self.timeout = timeout

    def forward(self, primary_url: str, request: Request, body: bytes) -> defer.Deferred[Forwarded]:
        return defer.Deferred.fromCoroutine(self._forward(primary_url, request, body))

    async def _forward(self, primary_url: str, request: Request, body: bytes) -> Forwarded:
        url = primary_url.rstrip("/").encode() + request.uri
        headers = Headers({FORWARDED_HEADER.encode(): [b"1"]})
        for name in (b"content-type", b"accept"):
            value = request.getHeader(name)
            if value:
                headers.setRawHeaders(name, [value.encode() if isinstance(value, str) else value])
        producer = cast(IBodyProducer, FileBodyProducer(BytesIO(body))) if body else None
        try:
            d = self.agent.request(request.method, url, headers, producer)
            d.addTimeout(self.timeout, self.reactor)
            response = await d
            d2 = readBody(response)
            d2.addTimeout(self.timeout, self.reactor)
            content = await d2
        except Exception as exc:  # noqa: BLE001 - any transport failure is the same answer
            log.warning("forwarding %s %s to %s failed: %s", request.method, request.uri, primary_url, exc)
            raise errors.forwarding_failed(f"Error while forwarding the request to the leader {primary_url}: "
                                           f"{exc}") from None
        ctype = (response.headers.getRawHeaders(b"content-type") or [b"application/vnd.schemaregistry.v1+json"])[0]
        if 200 <= response.code < 300:
            try:
                d3 = self.catch_up()
                d3.addTimeout(self.timeout, self.reactor)
                await d3
            except Exception as exc:  # noqa: BLE001 - the write is done; a slow replay only delays visibility
                log.info("catching up after a forwarded write: %s", exc)
        return Forwarded(response.code, ctype, content)
