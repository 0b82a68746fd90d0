"""The broker's listeners (Kafka's ``SocketServer`` with ``DynamicListenerConfig``).

One place owns what a broker listens on: each listener's security (TLS context, SASL settings),
its bound port and server factory, the connection quotas and socket options every listener
shares, and the endpoints the broker advertises. Start-up binds every configured listener
(:meth:`ListenerManager.start`); a dynamic change of ``listeners`` / ``advertised.listeners`` /
``listener.security.protocol.map`` closes the listeners gone, binds the new ones and hands the new
endpoints to the broker's registration (:meth:`reconfigure`, one change at a time); a change of
``sasl.enabled.mechanisms`` / ``sasl.jaas.config`` reaches the SASL listeners' next connections.
Shutdown stops accepting first, then closes the connections, as Kafka's ``stopProcessingRequests``.
"""
from __future__ import annotations

import logging
import socket
from typing import Any, Callable, Iterator

from twisted.internet import defer

from kafkalite.broker.credentials import UserCredentials
from kafkalite.broker.dispatcher import Dispatcher
from kafkalite.broker.runtime import BlockingRunner
from kafkalite.broker.services import BrokerServices
from kafkalite.config import LISTENER_RECONFIGURABLE, BrokerConfig, Endpoint
from kafkalite.net import tls
from kafkalite.net.sasl import SaslSettings
from kafkalite.net.server import ConnectionQuotas, KafkaServerFactory, SocketOptions, resolve_connection_overrides
from zk_schema.brokers import EndPoint

log = logging.getLogger(__name__)

#: dynamic configs that change what SASL listeners offer (applied to the next connections)
SASL_RECONFIGURABLE = frozenset(("sasl.enabled.mechanisms", "sasl.jaas.config"))


class ListenerManager:
    """Binds, re-binds and closes the broker's listeners; knows what the broker advertises.

    ``services`` is called once, at the first bind (the broker id is known by then), and its
    answer serves every listener, also those added later. ``on_endpoints_changed`` is told the new
    advertised endpoints after a dynamic listener change (the broker re-writes its registration).
    """

    #: what a dynamic change reconfigures here (a reconfigurable of ``dynamic_config.py``)
    reconfigurable_configs = LISTENER_RECONFIGURABLE | SASL_RECONFIGURABLE

    def __init__(self, config: BrokerConfig, reactor: Any, credentials: UserCredentials, blocking: BlockingRunner,
                 services: Callable[[], BrokerServices],
                 on_endpoints_changed: Callable[[list[EndPoint]], Any] = lambda endpoints: None) -> None:
        self.config = config
        self.on_endpoints_changed = on_endpoints_changed
        #: set when the broker's shutdown begins: no listener change is applied any more
        self.shutting_down = False
        self.reactor = reactor
        self.credentials = credentials
        self.blocking = blocking
        self._services = services
        self.request_services: BrokerServices | None = None
        # TLS contexts and SASL settings are built before the reactor runs, so a bad key store or
        # JAAS entry stops start-up with one line
        self.security = {ep.listener: self._security_of(ep.listener) for ep in config.listeners}
        self.ports: list[Any] = []
        self.factories: list[KafkaServerFactory] = []
        #: listener name -> (its configured endpoint, the listening port, its factory)
        self.bound: dict[str, tuple[Endpoint, Any, KafkaServerFactory]] = {}
        self.canonical_host: str | None = None
        #: False until the broker has started: listeners are bound (their ports are registered) but
        #: accept nothing yet, as Kafka's SocketServer before ``startProcessingRequests``
        self.processing = False
        #: dynamic listener changes, applied one after another
        self.changes = defer.DeferredLock()
        protected = config.inter_broker_listener if len(config.listeners) > 1 else None
        # host names in the overrides are resolved here, before the reactor runs (blocking DNS)
        self.connection_quotas = ConnectionQuotas(
            config["max.connections"], config["max.connections.per.ip"],
            resolve_connection_overrides(config.max_connections_per_ip_overrides), protected)
        self.socket_options = SocketOptions(config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"])

    # -- start / stop ------------------------------------------------------------------------------
    def start(self) -> list[EndPoint]:
        """Bind every listener; the endpoints to register (see :meth:`advertised`)."""
        if set(self.config.dynamic_broker) & (LISTENER_RECONFIGURABLE | SASL_RECONFIGURABLE):
            # dynamic listener / SASL configs read from ZooKeeper at start: the listeners' security
            # as they make it (a bad key store or JAAS entry still stops start-up with one line)
            self.security = {ep.listener: self._security_of(ep.listener) for ep in self.config.listeners}
        for ep in self.config.listeners:
            self._bind(ep)
        if self._needs_canonical_host():
            self.canonical_host = socket.getfqdn()   # blocking DNS on the reactor: once, at start-up, before anything is served
        return self.advertised()

    def start_processing(self) -> None:
        """Start accepting connections on every listener: the broker has registered and loaded its
        metadata. Until then a connecting client waits in the listen backlog, as with Kafka, and is
        never answered from an empty metadata cache (a restarted broker once told librdkafka there
        were no brokers and no such topic while it waited for its old registration to expire)."""
        self.processing = True
        for port in self.ports:
            _accepting(port, True)

    @defer.inlineCallbacks
    def stop_accepting(self) -> Any:
        for port in self.ports:
            yield port.stopListening()

    def close_connections(self) -> None:
        for factory in self.factories:
            factory.close_all()

    def connections(self) -> Iterator[tuple[str, Any]]:
        """(listener, client software) of every open connection (for the metrics)."""
        return ((f.listener, c.client_software) for f in self.factories for c in f.connections)

    # -- binding -----------------------------------------------------------------------------------
    def _security_of(self, listener: str) -> tuple[Any, SaslSettings | None]:
        """(TLS context factory or None, SASL settings or None) of one listener."""
        lc = self.config.listener_config(listener)
        options = tls.server_options(tls.key_material(lc)) if lc.security_protocol in ("SSL", "SASL_SSL") else None
        return options, self._sasl_settings(listener)

    def _sasl_settings(self, listener: str) -> SaslSettings | None:
        """The SASL settings of a SASL listener (None for others), from the current config."""
        lc = self.config.listener_config(listener)
        sasl = None
        if lc.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanisms = tuple(lc["sasl.enabled.mechanisms"])
            plain = self.config.jaas_config(listener, "PLAIN") if "PLAIN" in mechanisms else None
            sasl = SaslSettings(mechanisms, plain.plain_users() if plain is not None else {},
                                # read afresh on every authentication: a changed or deleted
                                # credential applies to the next connection
                                self.credentials.credential, lc["connection.failed.authentication.delay.ms"] / 1000.0,
                                self.reactor, lc["connections.max.reauth.ms"])
        return sasl

    def _bind(self, ep: Endpoint) -> None:
        """Listen on one listener (its TLS / SASL settings from ``security``)."""
        tls_options, sasl = self.security[ep.listener]
        if self.request_services is None:
            self.request_services = self._services()      # one for every listener, also those added later
        factory = KafkaServerFactory(Dispatcher(self.request_services, ep.listener), self.config["socket.request.max.bytes"],
                                     self.config["queued.max.requests"], listener=ep.listener,
                                     quotas=self.connection_quotas, socket_options=self.socket_options,
                                     max_idle_ms=self.config["connections.max.idle.ms"], clock=self.reactor,
                                     tls_options=tls_options, sasl=sasl)
        port = factory.listen(self.reactor, ep.port, ep.host or "0.0.0.0")
        if not self.processing:
            _accepting(port, False)
        self.ports.append(port)
        self.factories.append(factory)
        self.bound[ep.listener] = (ep, port, factory)

    @defer.inlineCallbacks
    def _unbind(self, listener: str) -> Any:
        """Stop listening on ``listener`` and close its connections (Kafka's removeListeners)."""
        _, port, factory = self.bound.pop(listener)
        self.ports.remove(port)
        self.factories.remove(factory)
        yield port.stopListening()
        factory.close_all()

    def _needs_canonical_host(self) -> bool:
        return self.canonical_host is None and any(not ep.host for ep in self.config.advertised_listeners)

    def advertised(self) -> list[EndPoint]:
        """What ``/brokers/ids/<id>`` lists, as Kafka's createBrokerInfo: the advertised listeners
        (``listeners`` when unset) that are bound, a port 0 replaced by the bound one and an empty
        host by this machine's canonical host name."""
        advertised: list[EndPoint] = []
        for adv in self.config.advertised_listeners:
            bound = self.bound.get(adv.listener)
            if bound is None:        # its bind failed (logged)
                continue
            host = adv.host or self.canonical_host or ""
            advertised.append(EndPoint(adv.listener, host, adv.port or bound[1].getHost().port,
                                       self.config.security_protocol(adv.listener)))
        return advertised

    # -- dynamic reconfiguration -------------------------------------------------------------------
    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        """Kafka's DynamicListenerConfig.validateReconfiguration (advertised listeners a subset of
        the listeners, a protocol for each, an existing listener keeps its protocol, the
        inter-broker listener stays) is ``BrokerConfig.check_reconfiguration``, which every
        dynamic config passes before the reconfigurables are asked: it also guards configs read
        from ZooKeeper where no reconfigurable exists yet (a tool's own checks)."""

    def reconfigure(self, changed: set[str]) -> None:
        """Dynamic listener or SASL configs changed (nothing to do before :meth:`start` binds)."""
        if changed & LISTENER_RECONFIGURABLE and self.bound and not self.shutting_down:
            d = self.apply_listeners()
            d.addErrback(lambda f: log.error("applying the new listeners failed: %s", f.getErrorMessage()))
        if changed & SASL_RECONFIGURABLE and self.bound:
            self.reconfigure_sasl()

    def apply_listeners(self) -> defer.Deferred:
        """Queue one application of the current listener configs (after any still running)."""
        return self.changes.run(self._apply_listeners)

    @defer.inlineCallbacks
    def _apply_listeners(self) -> Any:
        """Kafka's DynamicListenerConfig.reconfigure after ``listeners`` / ``advertised.listeners`` /
        ``listener.security.protocol.map`` changed: close the listeners gone (or moved to another
        host:port), bind the new ones, then hand the endpoints to ``on_endpoints_changed``
        (updateBrokerInfo) so clients and the other brokers see them."""
        wanted = {ep.listener: ep for ep in self.config.listeners}
        for name, (ep, _, _) in list(self.bound.items()):
            if name not in wanted or (wanted[name].host, wanted[name].port) != (ep.host, ep.port):
                log.info("closing listener %s (%s)", name, ep.uri())
                yield self._unbind(name)
        for name, ep in wanted.items():
            if name in self.bound:
                continue
            try:
                self.security[name] = self._security_of(name)
                self._bind(ep)
                log.info("listening on new listener %s", ep.uri())
            except Exception as exc:  # noqa: BLE001 - a port in use or bad key store: the others keep serving
                log.error("cannot listen on %s: %s", ep.uri(), exc)
        if self._needs_canonical_host():
            # getfqdn may block on DNS: off the reactor
            self.canonical_host = yield self.blocking.run(socket.getfqdn)
        yield self.on_endpoints_changed(self.advertised())

    def reconfigure_sasl(self) -> None:
        """``sasl.enabled.mechanisms`` or ``sasl.jaas.config`` changed: the SASL listeners offer the
        new mechanisms and the PLAIN users of their JAAS entry to the next connections; open ones
        keep their session."""
        for name, (_, _, factory) in self.bound.items():
            sasl = self._sasl_settings(name)
            self.security[name] = (self.security[name][0], sasl)
            if sasl is not None:
                factory.sasl = sasl


def _accepting(port: Any, on: bool) -> None:
    """Accept connections on a bound listening port, or leave them in the kernel's backlog (a
    Twisted TCP or TLS port reads its socket for accepts; an in-memory test port has no such
    switch and always accepts)."""
    switch = getattr(port, "startReading" if on else "stopReading", None)
    if switch is not None:
        switch()
