"""The console's own security: every POST route is guarded (CSRF token, read-only mode), the
session's token is checked, and the default bind is 127.0.0.1. No broker needed: the guard answers
before any handler runs (the SQL page, pointed at a closed port, is a page with a form)."""
from __future__ import annotations

from typing import Iterator

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from kafkalite.console.app import create_app
from kafkalite.console.main import build_parser, settings_from
from kafkalite.console.settings import ConsoleSettings

from .conftest import csrf_of

CLOSED = "127.0.0.1:1"      # nothing listens there


def settings(**kw: object) -> ConsoleSettings:
    return ConsoleSettings(CLOSED, sql_url="http://127.0.0.1:1", request_timeout_ms=500, **kw)  # type: ignore[arg-type]


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(settings(), samplers=False)) as c:
        yield c


def test_every_post_route_is_guarded() -> None:
    app = create_app(settings(), samplers=False)
    posts = [r for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert len(posts) >= 12
    assert all(getattr(r.endpoint, "guarded", False) for r in posts), [r.path for r in posts]
    assert not [r for r in app.routes if isinstance(r, Route) and {"PUT", "DELETE", "PATCH"} & (r.methods or set())]


def test_post_without_or_with_a_wrong_token_is_refused(client: TestClient) -> None:
    token = csrf_of(client.get("/sql").text)
    for data in ({"statement": "SHOW TOPICS;"}, {"statement": "SHOW TOPICS;", "csrf_token": "forged"},
                 {"statement": "SHOW TOPICS;", "csrf_token": token[:-1] + ("A" if token[-1] != "A" else "B")}):
        r = client.post("/sql", data=data)
        assert r.status_code == 403 and "CSRF" in r.text
    with TestClient(client.app) as other:      # another browser session: our token is not its token
        csrf_of(other.get("/sql").text)
        assert other.post("/sql", data={"statement": "x", "csrf_token": token}).status_code == 403


def test_the_sessions_token_passes_the_guard(client: TestClient) -> None:
    token = csrf_of(client.get("/sql").text)
    r = client.post("/sql", data={"statement": "SHOW TOPICS;", "csrf_token": token})
    assert r.status_code == 502 and "cannot reach http://127.0.0.1:1" in r.text       # the handler ran
    r = client.post("/sql", data={"statement": "SHOW TOPICS;"}, headers={"X-CSRF-Token": token})
    assert r.status_code == 502                                 # htmx sends the token as a header


def test_read_only_refuses_every_post_even_with_a_token() -> None:
    with TestClient(create_app(settings(read_only=True), samplers=False)) as c:
        page = c.get("/sql").text
        assert "read-only" in page
        token = csrf_of(page)
        for path in ("/topics", "/topics/t/delete", "/topics/t/produce", "/group/reset", "/security/acls", "/sql",
                     "/schemas/register"):
            r = c.post(path, data={"csrf_token": token})
            assert r.status_code == 403 and "read-only" in r.text, path


def test_binds_127_0_0_1_by_default_and_reads_the_command_line() -> None:
    s = settings_from(build_parser().parse_args(["--bootstrap-server", "h:1", "--metrics-urls", "http://a/m, http://b/m",
                                                 "--read-only"]))
    assert (s.host, s.port, s.read_only, s.metrics_urls) == ("127.0.0.1", 9021, True, ("http://a/m", "http://b/m"))
    s = settings_from(build_parser().parse_args(["--bootstrap-server", "h:1", "--listen", "0.0.0.0:0"]))
    assert (s.host, s.port) == ("0.0.0.0", 0)
