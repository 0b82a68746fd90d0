"""Worker-to-worker HTTP calls (Kafka's ``RestClient``): a follower sends the task
configurations its connector generated to the leader's internal endpoint
(``POST <leader>/connectors/<name>/tasks``), signed when the group runs ``sessioned`` (KIP-507).

Blocking (urllib): called from the herder's forwarding thread, never from the reactor.
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any, Mapping
from urllib.parse import quote

from kafkalite.connect.errors import ConnectException

log = logging.getLogger(__name__)


class ConnectRestException(ConnectException):
    """The other worker answered an error (Kafka's ConnectRestException): its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def http_request(url: str, method: str, body: Any = None, headers: Mapping[str, str] | None = None,
                 timeout: float = 90.0) -> Any:
    """One JSON call; the decoded answer (None for an empty one). An error answer is
    :class:`ConnectRestException` with the other worker's status and message; a transport
    failure is :class:`ConnectException`, as Kafka's RestClient reports them."""
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    return http_request_raw(url, method, data, headers, timeout)


def http_request_raw(url: str, method: str, data: bytes | None, headers: Mapping[str, str] | None = None,
                     timeout: float = 90.0) -> Any:
    """:func:`http_request` with the body already serialized (a signature covers these bytes)."""
    all_headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            message = str(json.loads(raw).get("message"))
        except (ValueError, AttributeError):
            message = raw.decode("utf-8", "replace") or str(exc)
        raise ConnectRestException(exc.code, message) from None
    except OSError as exc:
        raise ConnectException(f"IO Error trying to forward REST request: {exc}") from None
    try:
        return json.loads(text) if text.strip() else None
    except ValueError as exc:
        raise ConnectException(f"Unreadable answer from {url}: {exc}") from None


def task_configs_url(leader_url: str, connector: str) -> str:
    """The leader's internal endpoint for one connector's task configurations."""
    return f"{leader_url.rstrip('/')}/connectors/{quote(connector, safe='')}/tasks"
