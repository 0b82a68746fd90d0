"""Dynamic broker configs as Kafka 2.x keeps them in ZooKeeper (KIP-226).

``/config/brokers/<id>`` holds one broker's overrides, ``/config/brokers/<default>`` the cluster-wide
ones; AlterConfigs / IncrementalAlterConfigs for a BROKER resource write them (``write``) with a
``/config/changes/config_change_<seq>`` notification whose ``entity_path`` is ``brokers/<id>`` or
``brokers/<default>``. Every broker reads both at start and re-reads them when such a notification
arrives; the typed values become :class:`~kafkalite.config.BrokerConfig`'s dynamic layers
(per-broker over default over ``server.properties``). What changed is applied by the
reconfigurables registered with :meth:`DynamicBrokerConfigSync.add_reconfigurable` (Kafka's
``DynamicBrokerConfig.addReconfigurable``): each component declares the configs it reconfigures
(replication throttle rates, listeners and SASL, the cleaner threads, the topic defaults of the
``log.*`` synonyms, ...) and is told when one of them changed, in the order they registered.

Validation, as Kafka's ``DynamicBrokerConfig.validate``: before a write (:meth:`validate`, called
by AlterConfigs / IncrementalAlterConfigs, so also by ``kafkalite-configs --alter``) the new
config is checked against the config table and as a whole (``BrokerConfig.validate_dynamic``),
then every reconfigurable whose configs it changes is asked
(``validate_reconfiguration``, Kafka's ``Reconfigurable.validateReconfiguration``): a refusal is
a ConfigError and nothing is written. A config read from ZooKeeper (written by another tool)
goes through the same checks and is ignored, the broker keeping its config, when one refuses,
as Kafka's ``updateCurrentConfig`` does. Password configs (``sasl.jaas.config``) are stored
encrypted with ``password.encoder.secret`` in Kafka's format (kafkalite.security.password_encoder).
"""
from __future__ import annotations

import logging
from typing import AbstractSet, Any, Callable, Protocol

from twisted.internet import defer

from kafkalite.config import BROKER_KEYS, BrokerConfig, ConfigError
from kafkalite.security.password_encoder import PasswordEncoder, PasswordEncoderError
from kafkalite.broker.config_changes import ConfigChangeWatcher
from kafkalite.coordination.interfaces import ZooKeeper
from kafkalite.coordination.kafka_zk_client import KafkaZkClient

log = logging.getLogger(__name__)

DEFAULT = "<default>"


#: dynamic password configs: stored encrypted (Kafka's DynamicBrokerConfig.isPasswordConfig)
PASSWORD_KEYS = frozenset(n for n, k in BROKER_KEYS.items() if k.dynamic and k.kind == "password")


def password_encoder(config: BrokerConfig, old: bool = False) -> PasswordEncoder | None:
    """The encoder of ``password.encoder.secret`` (``old``: ``password.encoder.old.secret``), None if unset."""
    secret = config["password.encoder.old.secret"] if old else config["password.encoder.secret"]
    if not secret:
        return None
    return PasswordEncoder(secret, config["password.encoder.keyfactory.algorithm"],
                           config["password.encoder.cipher.algorithm"], config["password.encoder.key.length"],
                           config["password.encoder.iterations"])


def hide_passwords(config: dict[str, str]) -> dict[str, str]:
    """For logs: password values replaced by ``[hidden]``."""
    return {k: "[hidden]" if k in PASSWORD_KEYS else v for k, v in config.items()}


def entity_path_of(broker: str) -> str:
    """``brokers/<id>`` or ``brokers/<default>`` (``broker`` is an id or "" for the default)."""
    return f"brokers/{broker or DEFAULT}"


class Reconfigurable(Protocol):
    """A component that applies dynamic broker configs (Kafka's ``BrokerReconfigurable``).
    Values are validated before they are written (the config table, then each reconfigurable's
    :meth:`validate_reconfiguration`) and again before they are applied, so ``reconfigure``
    applies what is already known to be valid."""

    @property
    def reconfigurable_configs(self) -> AbstractSet[str] | None:
        """The configs it applies; None: it is told of every change."""

    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        """Can this component move from the running config to ``new`` (one of its configs
        changed)? Raises ConfigError with the reason if not (Kafka's validateReconfiguration)."""

    def reconfigure(self, changed: set[str]) -> None:
        """Apply the new values (``changed``: the changed configs, all of them, not only its own)."""


def _wants(reconfigurable: Reconfigurable, changed: AbstractSet[str]) -> bool:
    mine = reconfigurable.reconfigurable_configs
    return mine is None or not changed.isdisjoint(mine)


class DynamicBrokerConfigSync(ConfigChangeWatcher):
    """Keeps a BrokerConfig's dynamic layers equal to ZooKeeper's broker configs."""

    what = "broker config"

    def __init__(self, kafka_zk: KafkaZkClient, config: BrokerConfig, broker_id: Callable[[], int],
                 on_change: Callable[[set[str]], None] | None = None) -> None:
        self.kafka_zk = kafka_zk
        self.zk: ZooKeeper = kafka_zk.zk
        self.config = config
        self.broker_id = broker_id
        #: told of every change after the reconfigurables (a listener, e.g. a test's)
        self.on_change = on_change
        self.reconfigurables: list[Reconfigurable] = []

    def add_reconfigurable(self, reconfigurable: Reconfigurable) -> None:
        """Tell ``reconfigurable`` when one of its configs changes (after those registered before it)."""
        self.reconfigurables.append(reconfigurable)

    def _reconfigure(self, changed: set[str]) -> None:
        for reconfigurable in self.reconfigurables:
            if _wants(reconfigurable, changed):
                reconfigurable.reconfigure(changed)
        if self.on_change is not None:
            self.on_change(changed)

    def validate(self, broker: str, config: dict[str, str]) -> None:
        """Kafka's DynamicBrokerConfig.validate for a new ``/config/brokers/<broker>`` (``broker``
        "" for the cluster default), before it is written: the table's checks, then the
        reconfigurables'. Raises ConfigError."""
        self.validate_reconfigurables(self.config.validate_dynamic(config, per_broker=bool(broker)))

    def validate_reconfigurables(self, new: BrokerConfig) -> None:
        """Ask every reconfigurable whose configs differ between the running config and ``new``
        (Kafka's processReconfiguration with validateOnly); a refusal is re-raised as Kafka
        words it, with the reason after it."""
        changed = {name for name, key in BROKER_KEYS.items() if key.dynamic and new[name] != self.config[name]}
        if not changed:
            return
        for reconfigurable in self.reconfigurables:
            if _wants(reconfigurable, changed):
                try:
                    reconfigurable.validate_reconfiguration(new)
                except ConfigError as exc:
                    raise ConfigError(f"Invalid dynamic configuration: {exc}") from None

    @defer.inlineCallbacks
    def start(self) -> Any:
        """Load this broker's dynamic configs (the broker's ConfigChangeManager, started before,
        tells :meth:`on_entity_change` of later changes)."""
        yield self.reload()

    def read(self, broker: str) -> defer.Deferred:
        """Fires the stored overrides of broker ``broker`` ("" for the cluster default)."""
        return self.kafka_zk.get_entity_config(entity_path_of(broker))

    def write(self, broker: str, config: dict[str, str]) -> defer.Deferred:
        """Replace the overrides and notify every broker (Kafka's AdminZkClient.changeBrokerConfig)."""
        return self.kafka_zk.set_entity_config(entity_path_of(broker), config)

    def read_decoded(self, broker: str) -> defer.Deferred:
        """The stored overrides with their passwords decrypted; one that cannot be decoded (another
        secret) is left out with an error, as Kafka's fromPersistentProps does."""
        return self.read(broker).addCallback(self.decode_passwords)

    def write_encoded(self, broker: str, config: dict[str, str]) -> defer.Deferred:
        """``write`` with the passwords encrypted (Kafka's toPersistentProps); ConfigError (raised
        at once) without ``password.encoder.secret`` or for a password at the cluster default."""
        stored = dict(config)
        names = sorted(PASSWORD_KEYS & set(config))
        if names:
            if not broker:
                raise ConfigError("Password config can be defined only at broker level")
            encoder = password_encoder(self.config)
            if encoder is None:
                raise ConfigError("Password encoder secret not configured")
            for name in names:
                # PBKDF2 with a few thousand iterations: milliseconds on the reactor, once per alter
                stored[name] = encoder.encode(config[name])
        return self.write(broker, stored)

    def decode_passwords(self, stored: dict[str, str]) -> dict[str, str]:
        out = dict(stored)
        names = sorted(PASSWORD_KEYS & set(stored))
        encoders = [e for e in (password_encoder(self.config), password_encoder(self.config, old=True)) if e]
        for name in names:
            for encoder in encoders:
                try:
                    out[name] = encoder.decode(stored[name])
                    break
                except PasswordEncoderError:
                    continue
            else:
                log.error("dynamic password config %s could not be decoded%s, ignoring it", name,
                          "" if encoders else " (password.encoder.secret is not set)")
                del out[name]
        return out

    @defer.inlineCallbacks
    def reload(self) -> Any:
        mine = yield self.read_decoded(str(self.broker_id()))
        default = yield self.read("")
        changed = self.config.set_dynamic(mine, default, check=self.validate_reconfigurables)
        log.info("dynamic broker configs: broker %s, default %s%s", hide_passwords(mine) or "none",
                 hide_passwords(default) or "none",
                 f"; changed {sorted(changed)}" if changed else "")
        if changed:
            self._reconfigure(changed)

    def on_entity_change(self, entity_path: str) -> Any:
        if entity_path in (entity_path_of(str(self.broker_id())), entity_path_of("")):
            return self.reload()
        return None
