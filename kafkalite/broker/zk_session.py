"""This broker's registration in ZooKeeper and its reactions to the session's life.

Kafka's ``KafkaServer`` registers ``/brokers/ids/<id>`` (its czxid is the broker epoch), re-writes
it on a listener change (``updateBrokerInfo``) and re-creates it in a new session after an
expiry; ``KafkaController`` registers a session-expiration ``StateChangeHandler`` that makes the
controller resign when the session is lost. Both live here, with the broker-id generation of
``/brokers/seqid``, so the composition root only wires them.

The epochs are read by other parts when they need them (controlled shutdown, log-dir events,
the metadata router), so those parts take ``lambda: session.broker_epoch``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.broker.runtime import Clock
from kafkalite.broker.status_http import Health
from kafkalite.config import BrokerConfig
from kafkalite.controller.controller import Controller
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.client import SessionState
from kafkalite.errors import KafkaError
from zk_schema import paths
from zk_schema.brokers import BrokerRegistration, EndPoint

log = logging.getLogger(__name__)


class BrokerSession:
    """``broker_id`` is read when used (a generated id arrives after construction);
    ``broker_epochs`` is the registrations the watches show ({id: czxid})."""

    def __init__(self, config: BrokerConfig, kafka_zk: KafkaZkClient, clock: Clock, broker_id: Callable[[], int],
                 controller: Controller, broker_epochs: Callable[[], dict[int, int]]) -> None:
        self.config = config
        self.kafka_zk = kafka_zk
        self.clock = clock
        self.broker_id = broker_id
        self.controller = controller
        self.broker_epochs = broker_epochs
        self.broker_epoch = -1               # czxid of our registration znode
        self.first_broker_epoch = -1         # ... of this process's first registration (see MetadataRouter.apply_state)

    @defer.inlineCallbacks
    def generate_broker_id(self) -> Any:
        """Kafka's generated ids: bump /brokers/seqid's version; id = version + reserved.broker.max.id."""
        if not self.config["broker.id.generation.enable"]:
            raise KafkaError("broker.id is not set and broker.id.generation.enable is false")
        stat = yield self.kafka_zk.zk.set(paths.BROKER_SEQUENCE_ID, b"", -1)
        return stat.version + self.config["reserved.broker.max.id"]

    def _registration(self, advertised: list[EndPoint]) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id(), tuple(advertised), self.clock.now_ms(),
                                  rack=self.config["broker.rack"])

    @defer.inlineCallbacks
    def register(self, advertised: list[EndPoint]) -> Any:
        """Create ``/brokers/ids/<id>`` with these endpoints; fires what it registered."""
        registration = self._registration(advertised)
        self.broker_epoch = yield self.kafka_zk.register_broker(registration)
        self.first_broker_epoch = self.broker_epoch
        return registration

    @defer.inlineCallbacks
    def endpoints_changed(self, advertised: list[EndPoint]) -> Any:
        """The listeners changed: re-write ``/brokers/ids/<id>`` (Kafka's updateBrokerInfo) so
        clients and the other brokers see the new endpoints (before we registered, start()
        registers what is bound then)."""
        if self.broker_epoch < 0:
            return
        yield self.kafka_zk.update_broker_info(self._registration(advertised))
        log.info("broker %d now advertises %s", self.broker_id(),
                 ", ".join(ep.connection_string() for ep in advertised))

    def watch(self) -> None:
        """From now on follow the session: a re-created registration's czxid is our new epoch;
        a lost session makes the controller resign (its writes would be fenced anyway)."""
        self.kafka_zk.add_reregistration_listener(self._reregistered)
        self.kafka_zk.add_state_listener(self._session_state)

    def _reregistered(self, path: str, czxid: int) -> None:
        if path.endswith(f"/{self.broker_id()}"):
            self.broker_epoch = czxid

    def _session_state(self, state: SessionState) -> None:
        log.info("ZooKeeper session %s", state.value)
        if state == SessionState.LOST:
            self.controller.resign("ZooKeeper session expired")

    def registered(self) -> bool:
        """The watches show /brokers/ids/<id> with the epoch our registration got."""
        return self.broker_epoch >= 0 and self.broker_epochs().get(self.broker_id()) == self.broker_epoch

    def health(self, offline_dirs: list[str]) -> Health:
        """What /health reports."""
        state = self.kafka_zk.zk.state
        return Health(self.broker_id(), self.registered(), state.value if state is not None else "not started",
                      offline_dirs, self.controller.active)
