"""Controlled shutdown, the broker's side (Kafka's ``KafkaServer.controlledShutdown``).

Up to ``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms``
apart, to have the controller move this broker's leaderships away (ControlledShutdown v3 with the
broker epoch, or a direct call when this broker is the controller); then a bounded wait until
our own view shows them gone, so clients get NOT_LEADER_OR_FOLLOWER and re-route rather than a
closed socket. Following stops first: a leader must not add us back to an ISR the controller
just took us out of.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer, task

from kafkalite.broker.inter_broker import InterBrokerRequests
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.config import BrokerConfig
from kafkalite.controller.controller import Controller
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.metadata import MetadataCache
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.replication.fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)


class ControlledShutdown:
    """``broker_id`` and ``broker_epoch`` are read when the shutdown runs (both are known only
    after start-up registered the broker)."""

    def __init__(self, config: BrokerConfig, reactor: Any, metadata: MetadataCache, controller: Controller,
                 replicas: ReplicaManager, fetchers: ReplicaFetcherManager, inter_broker: InterBrokerRequests,
                 broker_id: Callable[[], int], broker_epoch: Callable[[], int]) -> None:
        self.config = config
        self.reactor = reactor
        self.metadata = metadata
        self.controller = controller
        self.replicas = replicas
        self.fetchers = fetchers
        self.inter_broker = inter_broker
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch

    @defer.inlineCallbacks
    def run(self) -> Any:
        """Fires True when the controller moved every leadership away, False after the last attempt."""
        self.fetchers.shutdown()
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for attempt in range(1, retries + 1):
            try:
                code, remaining = yield self._ask_controller()
            except Exception as exc:
                code, remaining = None, []
                log.info("controlled shutdown attempt %d failed: %s", attempt, exc)
            if code == ErrorCode.NONE and not remaining:
                log.info("controlled shutdown succeeded (attempt %d)", attempt)
                yield self._leaderships_gone(max(backoff, 2.0))
                return True
            if code is not None:
                log.info("controlled shutdown attempt %d: %s, %d partition(s) still led here", attempt,
                         ErrorCode(code).name, len(remaining))
            if attempt < retries:
                yield task.deferLater(self.reactor, backoff, lambda: None)
        log.warning("proceeding to an unclean shutdown: all %d controlled shutdown attempts failed", retries)
        return False

    @defer.inlineCallbacks
    def _ask_controller(self) -> Any:
        """(error code, partitions still led here) from the controller."""
        broker_id, broker_epoch = self.broker_id(), self.broker_epoch()
        controller = self.metadata.controller_id
        if controller == broker_id and self.controller.active:
            result = yield self.controller.controlled_shutdown(broker_id, broker_epoch)
            return result
        if controller < 0 or self.inter_broker.endpoint_of(controller) is None:
            raise KafkaError(f"no reachable controller (controller id {controller})")
        resp = yield self.inter_broker.request(controller, f"broker-{broker_id}", ApiKey.CONTROLLED_SHUTDOWN, 3,
                                               {"broker_id": broker_id, "broker_epoch": broker_epoch})
        return resp["error_code"], [(r["topic_name"], r["partition_index"]) for r in resp["remaining_partitions"]]

    @defer.inlineCallbacks
    def _leaderships_gone(self, limit_s: float) -> Any:
        """Wait (bounded) until the state watches have told us that we lead no replicated partition."""
        deadline = self.reactor.seconds() + limit_s
        while self.reactor.seconds() < deadline:
            if not self.replicas.leads_replicated_partitions():
                return
            yield task.deferLater(self.reactor, 0.01, lambda: None)
