"""Schema registry processes for tests: the package's ``kafkalite-schema-registry``.

``registry_factory(bootstrap, **overrides)`` starts one instance on a free 127.0.0.1 port and
returns it once ``GET /`` answers (it listens only after replaying ``_schemas``); every instance
is stopped after the test. The tests' default session timeout is 6 s (the broker's
``group.min.session.timeout.ms``) so a killed primary is noticed quickly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.cluster.processes import SchemaRegistryProcess

TEST_REGISTRY_DEFAULTS = {
    "kafkagroup.session.timeout.ms": "6000",
    "kafkagroup.heartbeat.interval.ms": "500",
}


@pytest.fixture
def registry_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[SchemaRegistryProcess] = []

    def make(bootstrap: str, **overrides: str) -> SchemaRegistryProcess:
        props = {**TEST_REGISTRY_DEFAULTS, **{k.replace("_", "."): v for k, v in overrides.items()}}
        proc = SchemaRegistryProcess(tmp_path, bootstrap, overrides=props, name=f"registry-{len(made)}")
        made.append(proc)
        proc.start()
        proc.wait_ready(need_primary=True)      # writes before the election answer 50004
        return proc

    yield make
    for proc in made:
        proc.stop(10)


class MemoryRegistry:
    """The registry's own REST site in memory (its state applied at once by ``MemoryStore``),
    reached by :class:`kafkalite.registry.client.RegistryClient` through a StringTransport: ids,
    compatibility levels and error codes are the registry's, with no broker, process or port.
    For services (the SQL engine) tested in process; ``install`` points every client at it."""

    URL = "http://memory-registry:8081"

    def __init__(self) -> None:
        from kafkalite.registry.rest import make_site
        from kafkalite.registry.service import MemoryStore, SchemaRegistry
        from kafkalite.registry.state import RegistryState

        self.state = RegistryState()
        self.registry = SchemaRegistry(self.state, MemoryStore(self.state), self.URL)
        self.registry.primary_url = self.URL
        self.site = make_site(self.registry)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request through the site: (HTTP status, JSON answer)."""
        import json

        from twisted.internet.testing import StringTransport

        data = b"" if body is None else json.dumps(body).encode()
        proto = self.site.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        head = {"Host": "registry", "Content-Length": str(len(data)),
                **({"Content-Type": "application/vnd.schemaregistry.v1+json"} if data else {})}
        proto.dataReceived(f"{method} {path} HTTP/1.0\r\n".encode()
                           + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + data)
        status_line, _, rest = transport.value().partition(b"\r\n")
        payload = rest.partition(b"\r\n\r\n")[2]
        return int(status_line.split()[1]), json.loads(payload) if payload else None

    def install(self, monkeypatch: Any) -> None:
        """Every ``RegistryClient`` (whatever URL it was given) talks to this registry."""
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        def call(client: RegistryClient, method: str, path: str, body: Any = None) -> Any:
            status, doc = self.call(method, path, body)
            if status >= 400:
                doc = doc if isinstance(doc, dict) else {}
                raise RegistryClientError(str(doc.get("message")), int(doc.get("error_code", -1)), status)
            return doc

        monkeypatch.setattr(RegistryClient, "_call", call)


@pytest.fixture
def memory_registry(monkeypatch: Any) -> MemoryRegistry:
    """A :class:`MemoryRegistry` every ``RegistryClient`` of the test talks to."""
    registry = MemoryRegistry()
    registry.install(monkeypatch)
    return registry
