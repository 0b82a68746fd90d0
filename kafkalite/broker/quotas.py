"""Client quotas on one broker: the three quota managers and their ZooKeeper source.

:class:`BrokerQuotas` is the service handlers use (``ctx.quotas``): ``produce`` (bytes of Produce
requests, ``producer_byte_rate``), ``fetch`` (bytes of record data in consumer Fetch responses,
``consumer_byte_rate``) and ``request`` (handler time in percent of one thread,
``request_percentage``), each Kafka's windowed rate per quota entity.

:class:`QuotaConfigSync` fills them as Kafka 2.x brokers do: at start every ``/config/clients/<c>``,
``/config/users/<u>`` and ``/config/users/<u>/clients/<c>`` (names URL-encoded as Kafka's
``Sanitizer`` does; ``<default>`` as is) is read, then ``/config/changes`` is watched and each new
``config_change_<seq>`` notification for a ``clients`` or ``users`` entity re-reads that entity.
Without SASL every client is the user ``ANONYMOUS``, so user quotas apply through
``/config/users/<default>`` (or ``/config/users/ANONYMOUS``), as in Kafka.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.broker.config_changes import ConfigChangeWatcher
from kafkalite.coordination.interfaces import ZooKeeper
from kafkalite.config import BrokerConfig
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.quota.replication import ReplicationQuotas
from kafkalite.quota import (CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QUOTA_KEYS, REQUEST_PERCENTAGE,
                             ClientQuotaManager, QuotaEntities, QuotaEntity, RateConfig)
from zk_schema import paths
from zk_schema.config import ConfigEntityZNode
from zk_schema.config import desanitize as entity_name, sanitize as znode_name
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)

#: the principal of every connection without SASL (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS = "ANONYMOUS"


def sanitize(name: str) -> str:
    """A user or client id as a znode name (Kafka's ``Sanitizer``); ``<default>`` stays as it is."""
    return name if name == DEFAULT else znode_name(name)


def desanitize(name: str) -> str:
    return name if name == DEFAULT else entity_name(name)


def entity_path(entity: QuotaEntity) -> str:
    """``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>`` (sanitized)."""
    if entity.user is None:
        assert entity.client_id is not None
        return f"clients/{sanitize(entity.client_id)}"
    if entity.client_id is None:
        return f"users/{sanitize(entity.user)}"
    return f"users/{sanitize(entity.user)}/clients/{sanitize(entity.client_id)}"


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The inverse of :func:`entity_path`; None for a path that is not a quota entity."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, desanitize(parts[1]))
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(desanitize(parts[1]), None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(desanitize(parts[1]), desanitize(parts[3]))
    return None


def quota_values(config: dict[str, str], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                log.warning("%s: ignoring %s=%r (not a number)", where, key, config[key])
    return out


def format_quota(key: str, value: float) -> str:
    """The znode value as Kafka writes it: byte rates are longs, request_percentage a double."""
    return str(float(value)) if key == REQUEST_PERCENTAGE else str(int(value))


class ReplicationThrottleRates:
    """The replication throttle rates (KIP-73), a reconfigurable of the dynamic broker config:
    ``leader/follower.replication.throttled.rate`` and ``replica.alter.log.dirs.io.max.bytes.per.second``
    applied to the replication quotas at start and whenever one changes."""

    reconfigurable_configs = frozenset(("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                        "replica.alter.log.dirs.io.max.bytes.per.second"))

    def __init__(self, config: BrokerConfig, quotas: ReplicationQuotas) -> None:
        self.config = config
        self.quotas = quotas
        self.reconfigure(set())

    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        """Any rate the config table accepts (a long, at least 0) can be applied."""

    def reconfigure(self, changed: set[str]) -> None:
        self.quotas.leader.update_bound(self.config["leader.replication.throttled.rate"])
        self.quotas.follower.update_bound(self.config["follower.replication.throttled.rate"])
        self.quotas.alter_log_dirs.update_bound(self.config["replica.alter.log.dirs.io.max.bytes.per.second"])


class BrokerQuotas:
    """The broker's client quota managers (one rate per quota entity and type)."""

    def __init__(self, rate: RateConfig | None = None, replication: RateConfig | None = None) -> None:
        self.entities = QuotaEntities()
        #: the replication throttles (leader and follower; rates from the dynamic broker configs)
        self.replication = ReplicationQuotas(replication or RateConfig())
        rate = rate or RateConfig()
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.entities, rate)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.entities, rate)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.entities, rate)
        #: the ZooKeeper side (set by the broker; None in tests without ZooKeeper)
        self.store: "QuotaConfigSync | None" = None


class QuotaConfigSync(ConfigChangeWatcher):
    """Keeps :attr:`BrokerQuotas.entities` equal to ZooKeeper's client and user configs."""

    what = "quota config"

    def __init__(self, kafka_zk: "KafkaZkClient", quotas: BrokerQuotas) -> None:
        self.kafka_zk = kafka_zk
        self.zk: ZooKeeper = kafka_zk.zk
        self.quotas = quotas
        quotas.store = self

    def start(self) -> defer.Deferred:
        """Load every quota entity (the broker's ConfigChangeManager tells :meth:`on_entity_change`
        of later changes)."""
        return self.load_all()

    @defer.inlineCallbacks
    def load_all(self) -> Any:
        """Read every quota entity (the broker's start)."""
        for entity in (yield self.entities()):
            yield self.reload(entity)

    @defer.inlineCallbacks
    def read_all(self) -> Any:
        """Fires {entity: its quota values} for every entity in ZooKeeper with a quota
        (DescribeClientQuotas answers from ZooKeeper, as Kafka's ZooKeeper-mode brokers do)."""
        out: dict[QuotaEntity, dict[str, float]] = {}
        for entity in (yield self.entities()):
            path = entity_path(entity)
            data, _ = yield self.zk.get_or_none(f"{paths.CONFIG}/{path}")
            if data is None:
                continue
            try:
                values = quota_values(dict(ConfigEntityZNode.decode(data).config), path)
            except ZkDataError:
                continue
            if values:
                out[entity] = values
        return out

    @defer.inlineCallbacks
    def read_one(self, entity: QuotaEntity) -> Any:
        """Fires the entity's quota values in ZooKeeper ({} if none)."""
        path = entity_path(entity)
        config = yield self.kafka_zk.get_entity_config(path)
        return quota_values(config, path)

    @defer.inlineCallbacks
    def entities(self) -> Any:
        """Fires every client and user entity that has a config znode."""
        found: list[QuotaEntity] = []
        for client in (yield self._children(f"{paths.CONFIG}/clients")):
            found.append(QuotaEntity(None, desanitize(client)))
        for user in (yield self._children(f"{paths.CONFIG}/users")):
            found.append(QuotaEntity(desanitize(user), None))
            for client in (yield self._children(f"{paths.CONFIG}/users/{user}/clients")):
                found.append(QuotaEntity(desanitize(user), desanitize(client)))
        return found

    @defer.inlineCallbacks
    def _children(self, path: str) -> Any:
        stat = yield self.zk.exists(path)
        if stat is None:
            return []
        try:
            children = yield self.zk.get_children(path)
        except Exception:  # noqa: BLE001 - deleted between exists and get_children: no children
            return []
        return children

    @defer.inlineCallbacks
    def reload(self, entity: QuotaEntity) -> Any:
        path = entity_path(entity)
        data, _ = yield self.zk.get_or_none(f"{paths.CONFIG}/{path}")
        config: dict[str, str] = {}
        if data is not None:
            try:
                config = dict(ConfigEntityZNode.decode(data).config)
            except ZkDataError as exc:
                log.warning("ignoring unreadable quota config %s: %s", path, exc)
        values = quota_values(config, path)
        self.quotas.entities.set(entity, values)
        log.info("client quotas of %s: %s", path, values or "none")

    def write(self, entity: QuotaEntity, quotas: dict[str, float]) -> defer.Deferred:
        """Set an entity's quota keys to ``quotas`` (other keys of its znode, e.g. SCRAM
        credentials, are kept) and notify every broker; the broker applies it when the
        notification arrives, like every other broker."""
        path = entity_path(entity)

        def merge(current: dict[str, str]) -> defer.Deferred:
            config = {k: v for k, v in current.items() if k not in QUOTA_KEYS}
            for key, value in quotas.items():
                config[key] = format_quota(key, value)
            return self.kafka_zk.set_entity_config(path, config)
        return self.kafka_zk.get_entity_config(path).addCallback(merge)

    def on_entity_change(self, path: str) -> Any:
        entity = parse_entity_path(path)
        return self.reload(entity) if entity is not None else None
