"""A Connect worker's properties, with Kafka's names and defaults (``WorkerConfig``,
``StandaloneConfig``, ``DistributedConfig`` in Kafka 2.8).

Client settings reach the worker's clients as Kafka's do: the security settings
(``security.protocol``, ``sasl.*``, ``ssl.*``) apply to every client, and ``producer.``,
``consumer.`` and ``admin.`` prefixed settings override them for one kind of client. Converter
settings are prefixed by the converter's role (``key.converter.schemas.enable=false``).
``plugin.path`` lists directories added to the import path, so plugin modules found there can be
named in ``connector.class``.
"""
from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlsplit

from kafkalite.client.security import ClientSecurity, is_security_key
from kafkalite.client import ClientError

from .signing import SigningConfig


class WorkerConfigError(ValueError):
    """A bad worker property; str() is the one-line message the CLI prints."""


PROTOCOLS = ("eager", "compatible", "sessioned")

#: property -> default, for both modes (Kafka's WorkerConfig)
COMMON_DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "localhost:9092",
    "key.converter": "",
    "value.converter": "",
    "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
    "task.shutdown.graceful.timeout.ms": "5000",
    "offset.flush.interval.ms": "60000",
    "offset.flush.timeout.ms": "5000",
    "listeners": "",
    "rest.host.name": "",
    "rest.port": "8083",
    "rest.advertised.host.name": "",
    "rest.advertised.port": "",
    "rest.advertised.listener": "",
    "plugin.path": "",
    "client.id": "",
    "topic.creation.enable": "true",
    "connector.client.config.override.policy": "None",      # KIP-458: None, Principal or All
}

#: distributed-only properties (Kafka's DistributedConfig)
DISTRIBUTED_DEFAULTS: dict[str, str] = {
    "group.id": "",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "3000",
    "rebalance.timeout.ms": "60000",
    "worker.sync.timeout.ms": "3000",
    "worker.unsync.backoff.ms": "300000",
    "config.storage.topic": "",
    "config.storage.replication.factor": "3",
    "offset.storage.topic": "",
    "offset.storage.replication.factor": "3",
    "offset.storage.partitions": "25",
    "status.storage.topic": "",
    "status.storage.replication.factor": "3",
    "status.storage.partitions": "5",
    "connect.protocol": "sessioned",
    "scheduled.rebalance.max.delay.ms": "300000",
    # KIP-507: signed internal requests under connect.protocol=sessioned (see signing.py)
    "inter.worker.key.generation.algorithm": "HmacSHA256",
    "inter.worker.key.size": "",
    "inter.worker.key.ttl.ms": "3600000",
    "inter.worker.signature.algorithm": "HmacSHA256",
    "inter.worker.verification.algorithms": "HmacSHA256",
}

STANDALONE_DEFAULTS: dict[str, str] = {"offset.storage.file.filename": ""}


def _int(props: Mapping[str, str], name: str) -> int:
    raw = props[name].strip()
    try:
        return int(raw)
    except ValueError:
        raise WorkerConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None


@dataclass(frozen=True)
class Listener:
    scheme: str
    host: str
    port: int


@dataclass
class WorkerConfig:
    """Parsed worker properties; :attr:`props` keeps every original property."""

    props: dict[str, str]
    distributed: bool
    bootstrap_servers: str
    listeners: list[Listener]
    advertised_url: str
    offset_flush_interval_ms: int
    offset_flush_timeout_ms: int
    task_shutdown_graceful_timeout_ms: int
    plugin_path: list[str]
    security: ClientSecurity
    # distributed
    group_id: str = ""
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    rebalance_timeout_ms: int = 60000
    config_topic: str = ""
    config_replication_factor: int = 3
    offset_topic: str = ""
    offset_replication_factor: int = 3
    offset_partitions: int = 25
    status_topic: str = ""
    status_replication_factor: int = 3
    status_partitions: int = 5
    connect_protocol: str = "sessioned"
    scheduled_rebalance_max_delay_ms: int = 300000
    signing: SigningConfig = field(default_factory=SigningConfig)
    # standalone
    offset_file: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, distributed: bool) -> "WorkerConfig":
        props = dict(COMMON_DEFAULTS)
        props.update(DISTRIBUTED_DEFAULTS if distributed else STANDALONE_DEFAULTS)
        props.update({k: v.strip() for k, v in raw.items()})
        for name in ("key.converter", "value.converter"):
            if not props[name]:
                raise WorkerConfigError(f'Missing required configuration "{name}" which has no default value.')
        listeners = _listeners(props)
        try:
            security = ClientSecurity.from_properties(props)
        except ClientError as exc:
            raise WorkerConfigError(str(exc)) from None
        cfg = cls(props=props, distributed=distributed, bootstrap_servers=props["bootstrap.servers"],
                  listeners=listeners, advertised_url=_advertised(props, listeners),
                  offset_flush_interval_ms=_int(props, "offset.flush.interval.ms"),
                  offset_flush_timeout_ms=_int(props, "offset.flush.timeout.ms"),
                  task_shutdown_graceful_timeout_ms=_int(props, "task.shutdown.graceful.timeout.ms"),
                  plugin_path=[p.strip() for p in props["plugin.path"].split(",") if p.strip()],
                  security=security)
        if distributed:
            for name in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"):
                if not props[name]:
                    raise WorkerConfigError(f'Missing required configuration "{name}" which has no default value.')
            protocol = props["connect.protocol"].lower()
            if protocol not in PROTOCOLS:
                raise WorkerConfigError(f"Invalid value {protocol} for configuration connect.protocol: "
                                        f"String must be one of: {', '.join(PROTOCOLS)}")
            cfg.group_id, cfg.connect_protocol = props["group.id"], protocol
            cfg.session_timeout_ms = _int(props, "session.timeout.ms")
            cfg.heartbeat_interval_ms = _int(props, "heartbeat.interval.ms")
            cfg.rebalance_timeout_ms = _int(props, "rebalance.timeout.ms")
            cfg.config_topic = props["config.storage.topic"]
            cfg.offset_topic = props["offset.storage.topic"]
            cfg.status_topic = props["status.storage.topic"]
            cfg.config_replication_factor = _int(props, "config.storage.replication.factor")
            cfg.offset_replication_factor = _int(props, "offset.storage.replication.factor")
            cfg.offset_partitions = _int(props, "offset.storage.partitions")
            cfg.status_replication_factor = _int(props, "status.storage.replication.factor")
            cfg.status_partitions = _int(props, "status.storage.partitions")
            cfg.scheduled_rebalance_max_delay_ms = _int(props, "scheduled.rebalance.max.delay.ms")
            try:
                cfg.signing = SigningConfig.parse(props)
            except ValueError as exc:
                raise WorkerConfigError(str(exc)) from None
        else:
            if not props["offset.storage.file.filename"]:
                raise WorkerConfigError('Missing required configuration "offset.storage.file.filename" '
                                        'which has no default value.')
            cfg.offset_file = props["offset.storage.file.filename"]
        return cfg

    def add_plugin_path(self) -> None:
        """Put ``plugin.path`` directories on the import path (plugins are Python modules there)."""
        for path in self.plugin_path:
            if path not in sys.path:
                sys.path.append(path)

    # -- client settings --------------------------------------------------------------------
    def client_props(self, prefix: str) -> dict[str, str]:
        """Kafka's client properties for one kind of client (``producer.``, ``consumer.``,
        ``admin.``): the worker's top-level security settings, overridden by prefixed ones."""
        out = {k: v for k, v in self.props.items() if is_security_key(k)}
        out["bootstrap.servers"] = self.bootstrap_servers
        out.update({k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)})
        return out

    def client_security(self, prefix: str) -> ClientSecurity:
        try:
            return ClientSecurity.from_properties(self.client_props(prefix))
        except ClientError as exc:
            raise WorkerConfigError(str(exc)) from None

    def converter_config(self, role: str) -> tuple[str, dict[str, str]]:
        """(class name, settings) of the worker's ``key.converter``/``value.converter``/``header.converter``."""
        prefix = role + "."
        return self.props[role], {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}


def _listeners(props: Mapping[str, str]) -> list[Listener]:
    raw = props.get("listeners", "")
    if not raw:
        host = props.get("rest.host.name") or "0.0.0.0"
        return [Listener("http", host, _int(props, "rest.port"))]
    out = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        parts = urlsplit(item)
        if parts.scheme.lower() not in ("http",):
            raise WorkerConfigError(f"Invalid listener {item!r}: only http:// listeners are supported")
        try:
            port = parts.port
        except ValueError:
            raise WorkerConfigError(f"Invalid listener {item!r}: bad port") from None
        out.append(Listener("http", parts.hostname or "0.0.0.0", 8083 if port is None else port))
    if not out:
        raise WorkerConfigError("listeners must name at least one listener")
    return out


def _advertised(props: Mapping[str, str], listeners: list[Listener]) -> str:
    host = props.get("rest.advertised.host.name") or listeners[0].host
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    port = props.get("rest.advertised.port") or str(listeners[0].port)
    return f"http://{host}:{port}"
