"""The registry's settings: Confluent's property names and defaults, from a properties file and flags.

Differences from Confluent's defaults, with the reason: ``kafkastore.timeout.ms`` is 10000 (not
500) because a write waits for acks=all and this instance's own replay through the Python client.
``request.max.bytes`` is kafkalite's own (Confluent relies on Jetty's limits).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .compatibility import parse_level


class ConfigError(ValueError):
    """A bad setting; str() is the one-line message the CLI prints."""


#: name -> (default, description)
PROPERTIES: dict[str, tuple[str, str]] = {
    "listeners": ("http://0.0.0.0:8081", "the URL the REST API listens on (one http listener)"),
    "host.name": ("", "the host other instances use to reach this one (default: the listener's host, "
                      "or the machine's name for 0.0.0.0)"),
    "kafkastore.bootstrap.servers": ("", "kafkalite brokers, host:port[,host:port] (PLAINTEXT:// allowed)"),
    "kafkastore.topic": ("_schemas", "the compacted topic holding the registry's state"),
    "kafkastore.topic.replication.factor": ("3", "replication of a new _schemas topic (at most the live brokers)"),
    "kafkastore.timeout.ms": ("10000", "how long a write waits for the store"),
    "kafkastore.init.timeout.ms": ("60000", "how long start-up may take to reach the store and replay it"),
    "schema.compatibility.level": ("backward", "the default compatibility level"),
    "schema.registry.group.id": ("schema-registry", "the group electing the primary"),
    "kafkagroup.session.timeout.ms": ("10000", "the election group's session timeout"),
    "kafkagroup.heartbeat.interval.ms": ("3000", "the election group's heartbeat interval"),
    "leader.eligibility": ("true", "whether this instance may become the primary"),
    "request.max.bytes": (str(16 * 1024 * 1024), "the largest request body accepted"),
}


@dataclass(frozen=True)
class RegistryConfig:
    listen_host: str
    listen_port: int
    advertised_host: str
    bootstrap_servers: str
    topic: str
    replication_factor: int
    timeout_ms: int
    init_timeout_ms: int
    compatibility_level: str
    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    leader_eligibility: bool
    max_request_bytes: int

    @property
    def url(self) -> str:
        """This instance's URL as the others reach it (Confluent's identity: scheme://host:port)."""
        return f"http://{self.advertised_host}:{self.listen_port}"


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java-style properties file: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}: line {line!r} is not key=value")
        props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def _int(props: dict[str, str], name: str, minimum: int = 0) -> int:
    raw = props[name]
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}")
    return value


def build(props: dict[str, str]) -> RegistryConfig:
    """Validate ``props`` (unknown keys are ignored, as Confluent's config does) over the defaults."""
    merged = {k: d for k, (d, _) in PROPERTIES.items()}
    merged.update({k: v for k, v in props.items() if v is not None})
    listener = merged["listeners"].split(",")[0].strip()
    parts = urlsplit(listener if "://" in listener else f"http://{listener}")
    if parts.scheme != "http":
        raise ConfigError(f"listeners={listener!r}: only http:// listeners are supported")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"listeners={listener!r}: bad port") from None
    if port is None:
        raise ConfigError(f"listeners={listener!r} needs a port")
    host = parts.hostname or "0.0.0.0"
    advertised = merged["host.name"] or (host if host not in ("0.0.0.0", "::", "") else _machine_name())
    bootstrap = ",".join(s.strip().split("://")[-1] for s in merged["kafkastore.bootstrap.servers"].split(",")
                         if s.strip())
    if not bootstrap:
        raise ConfigError("kafkastore.bootstrap.servers is required (host:port of kafkalite brokers)")
    level = parse_level(merged["schema.compatibility.level"])
    if level is None:
        raise ConfigError(f"schema.compatibility.level={merged['schema.compatibility.level']!r} is not one of "
                          "none, backward, backward_transitive, forward, forward_transitive, full, full_transitive")
    eligibility = merged["leader.eligibility"].strip().lower()
    if eligibility not in ("true", "false"):
        raise ConfigError(f"leader.eligibility={merged['leader.eligibility']!r} must be true or false")
    if not merged["kafkastore.topic"].strip():
        raise ConfigError("kafkastore.topic must not be empty")
    return RegistryConfig(
        listen_host=host, listen_port=port, advertised_host=advertised, bootstrap_servers=bootstrap,
        topic=merged["kafkastore.topic"].strip(),
        replication_factor=_int(merged, "kafkastore.topic.replication.factor", 1),
        timeout_ms=_int(merged, "kafkastore.timeout.ms", 1), init_timeout_ms=_int(merged, "kafkastore.init.timeout.ms", 1),
        compatibility_level=level, group_id=merged["schema.registry.group.id"],
        session_timeout_ms=_int(merged, "kafkagroup.session.timeout.ms", 1),
        heartbeat_interval_ms=_int(merged, "kafkagroup.heartbeat.interval.ms", 1),
        leader_eligibility=eligibility == "true", max_request_bytes=_int(merged, "request.max.bytes", 1024))


def _machine_name() -> str:
    import socket
    return socket.getfqdn() or "localhost"
