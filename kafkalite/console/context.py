"""The console's connections: one Admin (one KafkaClient) shared by every service, behind a lock.

kafkalite's client is blocking and keeps one socket per broker; the web server calls it from a
thread pool (never on the event loop), so the calls of concurrent page views are serialised here
rather than interleaving requests on the same connections. A page view is a handful of requests,
so a lock is cheaper than a pool of clients (each with its own sockets and metadata).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

from kafkalite.client.admin import Admin
from kafkalite.client.core import KafkaClient
from kafkalite.registry.client import RegistryClient

from .settings import ConsoleSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


class ConsoleContext:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        self._admin: Admin | None = None
        #: the produce form's one Producer (its own client and sender thread) is used one form at a time
        self.producer_lock = threading.Lock()
        self.registry = RegistryClient(settings.registry_url) if settings.registry_url else None

    @property
    def admin(self) -> Admin:
        """The shared Admin, connected on first use (so the console starts before the brokers)."""
        if self._admin is None:
            self._admin = Admin(self.settings.bootstrap_servers, client_id="kafkalite-console",
                                request_timeout_ms=self.settings.request_timeout_ms, security=self.settings.security)
        return self._admin

    @property
    def client(self) -> KafkaClient:
        return self.admin.client

    def call(self, fn: Callable[[Admin], T]) -> T:
        """Run ``fn`` with the shared Admin, one caller at a time (call from a worker thread)."""
        with self._lock:
            return fn(self.admin)

    def close(self) -> None:
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None
