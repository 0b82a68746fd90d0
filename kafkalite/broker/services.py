"""The narrow services a request handler is given.

A handler sees a :class:`RequestContext`: the request's header fields, its connection and
listener, and typed services (replica manager, metadata, group coordinator, topic admin,
producer ids, controller, configuration, clock, the request-path metrics), as Redpanda's request context hands them out.
No handler, coordinator or admin module reaches the broker object itself, so what a handler
depends on is visible in what it calls on ``ctx``.

The clock and the blocking runner every part shares live in ``broker/runtime.py`` (no project
imports, so no import circle); they are re-exported here for the request-path code and tests
that name them beside the context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.broker.runtime import BlockingRunner as BlockingRunner
from kafkalite.broker.runtime import Clock as Clock
from kafkalite.broker.runtime import InlineRunner as InlineRunner
from kafkalite.broker.runtime import ThreadPoolRunner as ThreadPoolRunner
from kafkalite.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType

if TYPE_CHECKING:
    from kafkalite.broker.admin import TopicAdmin
    from kafkalite.broker.authorizer import AclAuthorizer
    from kafkalite.broker.metrics import BrokerMetrics
    from kafkalite.broker.credentials import UserCredentials
    from kafkalite.broker.producer_ids import ProducerIdManager
    from kafkalite.broker.dynamic_config import DynamicBrokerConfigSync
    from kafkalite.broker.fetch_session import FetchSessionCache
    from kafkalite.broker.quotas import BrokerQuotas
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.broker.topic_configs import TopicConfigs
    from kafkalite.config import BrokerConfig
    from kafkalite.controller.controller import Controller
    from kafkalite.broker.offsets_topic import OffsetsTopic
    from kafkalite.broker.txn_topic import TransactionTopic
    from kafkalite.metadata import MetadataCache
    from kafkalite.net.server import KafkaConnection


@dataclass(frozen=True)
class BrokerServices:
    """Everything a request may need, each behind its own narrow type."""

    broker_id: int
    config: "BrokerConfig"
    clock: Clock
    metadata: "MetadataCache"
    topic_configs: "TopicConfigs"
    replicas: "ReplicaManager"
    groups: "OffsetsTopic"
    topics: "TopicAdmin"
    producer_ids: "ProducerIdManager"
    controller: "Controller"
    metrics: "BrokerMetrics"
    credentials: "UserCredentials"
    txns: "TransactionTopic"
    quotas: "BrokerQuotas"
    #: Kafka's AclAuthorizer when ``authorizer.class.name`` is set; None: everything is allowed
    authorizer: "AclAuthorizer | None" = None
    #: ``/config/brokers/...`` (dynamic broker configs); None without ZooKeeper (unit tests)
    dynamic_config: "DynamicBrokerConfigSync | None" = None
    #: KIP-227 fetch sessions; None: every fetch is sessionless
    fetch_sessions: "FetchSessionCache | None" = None


@dataclass
class RequestContext:
    """One request: its header, where it came from, and the services that answer it."""

    services: BrokerServices
    conn: "KafkaConnection"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str
    #: the request's size in bytes (header and body), what Kafka's produce quota counts
    request_size: int = 0
    #: the longest quota throttle (ms) a handler decided on: the dispatcher puts it in the
    #: response's throttle_time_ms and mutes the connection for it (KIP-219)
    throttle_ms: int = 0
    #: a follower's Fetch: replication is not subject to client quotas
    throttle_exempt: bool = False

    @property
    def now_ms(self) -> int:
        return self.services.clock.now_ms()

    @property
    def principal(self) -> Any:
        """The client's ``KafkaPrincipal`` (certificate DN, SASL user, or User:ANONYMOUS)."""
        return self.conn.principal

    @property
    def broker_id(self) -> int:
        return self.services.broker_id

    @property
    def config(self) -> "BrokerConfig":
        return self.services.config

    @property
    def metadata(self) -> "MetadataCache":
        return self.services.metadata

    @property
    def topic_configs(self) -> "TopicConfigs":
        return self.services.topic_configs

    @property
    def replicas(self) -> "ReplicaManager":
        return self.services.replicas

    @property
    def groups(self) -> "OffsetsTopic":
        return self.services.groups

    @property
    def topics(self) -> "TopicAdmin":
        return self.services.topics

    @property
    def producer_ids(self) -> "ProducerIdManager":
        return self.services.producer_ids

    @property
    def controller(self) -> "Controller":
        return self.services.controller

    @property
    def metrics(self) -> "BrokerMetrics":
        return self.services.metrics

    @property
    def credentials(self) -> "UserCredentials":
        return self.services.credentials

    @property
    def txns(self) -> "TransactionTopic":
        """The transaction coordinator and ``__transaction_state``."""
        return self.services.txns

    @property
    def quotas(self) -> "BrokerQuotas":
        return self.services.quotas

    @property
    def fetch_sessions(self) -> "FetchSessionCache | None":
        return self.services.fetch_sessions

    @property
    def dynamic_config(self) -> "DynamicBrokerConfigSync | None":
        return self.services.dynamic_config

    @property
    def quota_user(self) -> str:
        """The user quotas are looked up for: the authenticated principal's name (ANONYMOUS
        without authentication, as Kafka)."""
        principal = getattr(self.conn, "principal", None)
        return principal.name if principal is not None else "ANONYMOUS"

    @property
    def authorizer(self) -> "AclAuthorizer | None":
        return self.services.authorizer

    def authorize(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """May this request's principal, from its host, do ``operation`` on the resource? (Kafka's
        ``AuthHelper.authorize``; always yes without an authorizer.) The one check every handler uses."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        principal = getattr(self.conn, "principal", None)
        return authorizer.authorize(str(principal) if principal is not None else "User:ANONYMOUS",
                                    getattr(self.conn, "peer_host", "?"), operation, resource_type, name)

    def authorize_by_resource_type(self, operation: Operation, resource_type: ResourceType) -> bool:
        """May this principal do ``operation`` on some resource of the type? (yes without an authorizer)"""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        principal = getattr(self.conn, "principal", None)
        return authorizer.matcher.authorize_by_resource_type(
            str(principal) if principal is not None else "User:ANONYMOUS", getattr(self.conn, "peer_host", "?"),
            operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430's bit field of the operations this principal may do on the resource (every
        supported operation without an authorizer, as Kafka's AuthHelper)."""
        authorizer = self.services.authorizer
        if authorizer is None:
            bits = 0
            for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
                bits |= 1 << int(op)
            return bits
        principal = getattr(self.conn, "principal", None)
        return authorizer.authorized_operations(str(principal) if principal is not None else "User:ANONYMOUS",
                                                getattr(self.conn, "peer_host", "?"), resource_type, name)

    def throttle(self, ms: int) -> None:
        """Ask for ``ms`` of throttling (the longest asked for wins)."""
        self.throttle_ms = max(self.throttle_ms, ms)
