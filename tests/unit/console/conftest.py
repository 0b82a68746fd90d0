"""Fixtures of the console's handler tests: the app over the module's one broker (and, where a
test needs it, a registry), driven by Starlette's TestClient (httpx, in process, no browser)."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from starlette.testclient import TestClient

from kafkalite.console.app import create_app
from kafkalite.console.settings import ConsoleSettings

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"|"X-CSRF-Token": "([^"]+)"')


def csrf_of(html: str) -> str:
    """The session's token as a page carries it (a form's field, or the body's htmx headers)."""
    m = TOKEN.search(html)
    assert m, "the page carries no CSRF token"
    return m.group(1) or m.group(2)


class Console:
    """A TestClient with the session's CSRF token at hand (read from a page, as a browser would)."""

    def __init__(self, client: TestClient) -> None:
        self.http = client
        self._token: str | None = None

    def get(self, url: str, **kw: Any) -> Any:
        return self.http.get(url, **kw)

    def token(self) -> str:
        if self._token is None:
            page = self.http.get("/metrics")           # a page that needs no broker
            assert page.status_code == 200, page.text
            self._token = csrf_of(page.text)
        return self._token

    def post(self, url: str, data: dict[str, Any] | None = None, **kw: Any) -> Any:
        return self.http.post(url, data={"csrf_token": self.token(), **(data or {})}, follow_redirects=False, **kw)


def make_console(settings: ConsoleSettings) -> Iterator[Console]:
    app = create_app(settings, samplers=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield Console(client)


@pytest.fixture(scope="module")
def console(broker: Any) -> Iterator[Console]:
    yield from make_console(ConsoleSettings(broker.bootstrap, lag_sample_interval_s=0))
