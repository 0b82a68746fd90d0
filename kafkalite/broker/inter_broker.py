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
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import DescribeLogDirsResponseDescribeLogDirsResult

#: what the controller learns of one broker's log dirs: (log dir, error code, {(topic, partition)})
LogDirState = tuple[str, int, set[tuple[str, int]]]


class InterBrokerRequests:
    """``broker_id`` is read when a request goes out (a generated id arrives after construction);
    ``local_log_dirs`` answers DescribeLogDirs for this broker without a connection."""

    def __init__(self, config: BrokerConfig, reactor: Any, metadata: MetadataCache, broker_id: Callable[[], int],
                 local_log_dirs: Callable[[], list[DescribeLogDirsResponseDescribeLogDirsResult]]) -> None:
        self.config = config
        self.reactor = reactor
        self.metadata = metadata
        self.broker_id = broker_id
        self.local_log_dirs = local_log_dirs
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

    @defer.inlineCallbacks
    def describe_log_dirs_of(self, broker_id: int) -> Any:
        """For the controller: DescribeLogDirs of ``broker_id`` (ourselves directly, else over the
        inter-broker listener), fired as a list of :data:`LogDirState`."""
        if broker_id == self.broker_id():
            results = self.local_log_dirs()
        else:
            resp = yield self.request(broker_id, f"controller-{self.broker_id()}", ApiKey.DESCRIBE_LOG_DIRS, 2,
                                      {"topics": None})
            results = resp["results"]
        states: list[LogDirState] = [
            (r["log_dir"], r["error_code"], {(t["name"], p["partition_index"]) for t in r["topics"]
                                             for p in t["partitions"]})
            for r in results]
        return states
