"""The broker's own requests to other brokers over the inter-broker listener (the controller's
DescribeLogDirs, ControlledShutdown to the controller); the follower fetchers and the
transaction-marker channel share its endpoint lookup and security.

A request opens a connection, asks once and closes it (Kafka keeps controller channels; these
requests are rare: a log-dir event, a shutdown), bounded by ``controller.socket.timeout.ms``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.config import BrokerConfig
from kafkalite.errors import KafkaError
from kafkalite.metadata import MetadataCache
from kafkalite.net import client as net_client


class InterBrokerRequests:
    def __init__(self, config: BrokerConfig, reactor: Any, metadata: MetadataCache) -> None:
        self.config = config
        self.reactor = reactor
        self.metadata = metadata
        # our own inter-broker identity (TLS, SASL): built before the reactor runs, so a bad key
        # store or JAAS entry stops start-up with one line
        self.security = net_client.ClientSecurity.for_inter_broker(config)
        #: ``net.client.connect`` with this broker's inter-broker security
        self.connect: Callable[..., defer.Deferred] = functools.partial(net_client.connect, security=self.security)

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of ``broker_id``'s inter-broker listener, as the metadata shows it."""
        info = self.metadata.brokers.get(broker_id)
        if info is None:
            return None
        return info.endpoint(self.config.inter_broker_listener)

    @defer.inlineCallbacks
    def request(self, broker_id: int, client_id: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to ``broker_id``; fires its decoded response (KafkaError: no endpoint)."""
        endpoint = self.endpoint_of(broker_id)
        if endpoint is None:
            raise KafkaError(f"broker {broker_id} has no {self.config.inter_broker_listener} endpoint")
        timeout = self.config["controller.socket.timeout.ms"] / 1000.0
        conn = yield net_client.connect(self.reactor, endpoint[0], endpoint[1], client_id, timeout,
                                        security=self.security)
        try:
            resp = yield conn.request(api_key, version, body, timeout)
        finally:
            conn.close()
        return resp
