"""The console's connections: one Admin (one KafkaClient) and one Producer per identity, behind
locks; and, with ``--user-login``, one such context per logged-in person.

kafkalite's client is blocking and keeps one socket per broker; the web server calls it from a
thread pool (never on the event loop), so the calls of concurrent page views are serialised here
rather than interleaving requests on the same connections. A page view is a handful of requests,
so a lock is cheaper than a pool of clients (each with its own sockets and metadata).

Per-person access: the services hold the console's own context, and a request made by a logged-in
person runs with :data:`_person` set to that person's context (the web layer sets it; Starlette's
thread pool carries context variables into the worker thread), so every call below goes out with
the person's SASL credentials and the cluster's ACLs apply to what they see and do. Background
work (lag and metrics sampling) runs with the console's own credentials.
"""
from __future__ import annotations

import contextvars
import dataclasses
import logging
import secrets
import threading
import time
from typing import Callable, TypeVar

from kafkalite.client.admin import Admin
from kafkalite.client.core import KafkaClient
from kafkalite.client.errors import ClientError
from kafkalite.client.producer import Producer
from kafkalite.registry.client import RegistryClient

from .settings import ConsoleSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


class ConsoleContext:
    def __init__(self, settings: ConsoleSettings, registry: RegistryClient | None = None) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        self._admin: Admin | None = None
        self._producer: Producer | None = None
        #: the produce form's Producer (its own client and sender thread) is used one form at a time
        self.producer_lock = threading.Lock()
        self.registry = registry or (RegistryClient(settings.registry_url) if settings.registry_url else None)

    def _target(self) -> "ConsoleContext":
        person = _person.get()
        return person if person is not None else self

    @property
    def admin(self) -> Admin:
        """The Admin of the current identity, connected on first use (the console may start first)."""
        target = self._target()
        if target is not self:
            return target.admin
        if self._admin is None:
            self._admin = Admin(self.settings.bootstrap_servers, client_id="kafkalite-console",
                                request_timeout_ms=self.settings.request_timeout_ms, security=self.settings.security)
        return self._admin

    @property
    def client(self) -> KafkaClient:
        return self.admin.client

    def call(self, fn: Callable[[Admin], T]) -> T:
        """Run ``fn`` with the current identity's Admin, one caller at a time (from a worker thread)."""
        target = self._target()
        if target is not self:
            return target.call(fn)
        with self._lock:
            return fn(self.admin)

    def produce(self, fn: Callable[[Producer], T]) -> T:
        """Run ``fn`` with the current identity's Producer (acks=all, no topic auto-creation)."""
        target = self._target()
        if target is not self:
            return target.produce(fn)
        with self.producer_lock:
            if self._producer is None:
                self._producer = Producer(self.settings.bootstrap_servers, acks="all",
                                          client_id="kafkalite-console-producer", allow_auto_create_topics=False,
                                          security=self.settings.security,
                                          request_timeout_ms=self.settings.request_timeout_ms)
            return fn(self._producer)

    def close(self) -> None:
        with self.producer_lock:
            if self._producer is not None:
                self._producer.close(5)
                self._producer = None
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None


#: the logged-in person's context for the request being served (None: the console's own)
_person: contextvars.ContextVar[ConsoleContext | None] = contextvars.ContextVar("kafkalite_console_person",
                                                                                 default=None)


class LoginFailed(Exception):
    pass


class Logins:
    """Contexts of the people logged in (``--user-login``), by a random key kept in their session.

    A login is checked by authenticating to the brokers (a Metadata request over SASL); the
    password stays in this process's memory only (never in the cookie). An idle login expires.
    """

    def __init__(self, console: ConsoleContext, idle_s: float = 1800.0) -> None:
        self.console = console
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._by_key: dict[str, tuple[str, ConsoleContext, float]] = {}

    def login(self, username: str, password: str) -> str:
        if not username or not password:
            raise LoginFailed("give your user name and password")
        own = self.console.settings
        security = dataclasses.replace(own.security, username=username, password=password)
        person = ConsoleContext(dataclasses.replace(own, security=security), self.console.registry)
        try:
            person.call(lambda admin: admin.client.metadata([]))
        except ClientError as exc:
            person.close()
            raise LoginFailed(f"login failed: {exc}") from None
        key = secrets.token_urlsafe(32)
        with self._lock:
            self._by_key[key] = (username, person, time.monotonic())
        return key

    def lookup(self, key: str | None) -> tuple[str, ConsoleContext] | None:
        """(user name, context) of a live login (its idle timer restarts), None otherwise."""
        self.expire()
        with self._lock:
            entry = self._by_key.get(key or "")
            if entry is None:
                return None
            self._by_key[key or ""] = (entry[0], entry[1], time.monotonic())
            return entry[0], entry[1]

    def logout(self, key: str | None) -> None:
        with self._lock:
            entry = self._by_key.pop(key or "", None)
        if entry is not None:
            entry[1].close()

    def expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            old = [k for k, (_, _, at) in self._by_key.items() if now - at > self.idle_s]
            gone = [self._by_key.pop(k)[1] for k in old]
        for ctx in gone:
            ctx.close()

    def close_all(self) -> None:
        with self._lock:
            gone = [ctx for _, ctx, _ in self._by_key.values()]
            self._by_key.clear()
        for ctx in gone:
            ctx.close()


class acting_as:
    """``with acting_as(person):`` runs the block (and the worker threads it starts) as ``person``."""

    def __init__(self, person: ConsoleContext | None) -> None:
        self.person = person
        self._token: contextvars.Token[ConsoleContext | None] | None = None

    def __enter__(self) -> None:
        self._token = _person.set(self.person)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _person.reset(self._token)


