"""Broker and topic configuration: one typed table each, with Kafka's property names and defaults.

A ``server.properties`` file is parsed into :class:`BrokerConfig`; an unknown or invalid property
is a :class:`ConfigError` whose message is one line naming the property. Topic-level settings
(``retention.ms``, ``cleanup.policy``, ...) take their defaults from the broker's ``log.*``
synonyms, exactly as Kafka resolves them, so DescribeConfigs can report value, source and
synonyms from the same table.
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, NamedTuple

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A property that is unknown, malformed or out of range; str() is one line for the user."""


# Kafka's ConfigType numbering (DescribeConfigs v3+).
TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
              "class": 8, "password": 9}


def _parse(name: str, kind: str, raw: Any) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    try:
        if kind in ("int", "long", "short"):
            value = int(text)
            limit = {"int": INT_MAX, "short": 32767, "long": LONG_MAX}[kind]
            if not -limit - 1 <= value <= limit:
                raise ValueError
            return value
        if kind == "double":
            return float(text)
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if kind == "list":
            return [item.strip() for item in text.split(",") if item.strip()]
    except ValueError:
        raise ConfigError(f"Invalid value {raw!r} for configuration {name}: expected {kind}") from None
    return text


def at_least(low: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: must be at least {low}")
    return check


def one_of(*choices: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v not in choices:
                raise ConfigError(f"Invalid value {v!r} for configuration {name}: must be one of {', '.join(choices)}")
    return check


class KafkaVersion(NamedTuple):
    """One of Kafka 2.8's ``ApiVersion`` levels (inter.broker.protocol.version and the message
    format versions take the same strings): its full name, its rank and the record format
    (magic) it writes: 0 before 0.10.0, 1 for 0.10.x, 2 from 0.11.0."""

    name: str
    rank: int
    record_version: int


#: Kafka 2.8's ApiVersion.allVersions in order, with their record versions.
_VERSION_NAMES: tuple[tuple[str, int], ...] = (
    ("0.8.0", 0), ("0.8.1", 0), ("0.8.2", 0), ("0.9.0", 0),
    ("0.10.0-IV0", 1), ("0.10.0-IV1", 1), ("0.10.1-IV0", 1), ("0.10.1-IV1", 1), ("0.10.1-IV2", 1), ("0.10.2-IV0", 1),
    ("0.11.0-IV0", 2), ("0.11.0-IV1", 2), ("0.11.0-IV2", 2), ("1.0-IV0", 2), ("1.1-IV0", 2), ("2.0-IV0", 2),
    ("2.0-IV1", 2), ("2.1-IV0", 2), ("2.1-IV1", 2), ("2.1-IV2", 2), ("2.2-IV0", 2), ("2.2-IV1", 2), ("2.3-IV0", 2),
    ("2.3-IV1", 2), ("2.4-IV0", 2), ("2.4-IV1", 2), ("2.5-IV0", 2), ("2.6-IV0", 2), ("2.7-IV0", 2), ("2.7-IV1", 2),
    ("2.7-IV2", 2), ("2.8-IV0", 2), ("2.8-IV1", 2),
)


def _version_table() -> dict[str, KafkaVersion]:
    """Full names and short ones ("0.10.0" -> its latest internal version, as Kafka's versionMap)."""
    table: dict[str, KafkaVersion] = {}
    for rank, (name, magic) in enumerate(_VERSION_NAMES):
        table[name] = table[name.split("-")[0]] = KafkaVersion(name, rank, magic)
    return table


_VERSIONS = _version_table()


@functools.lru_cache(maxsize=256)
def kafka_version(text: str) -> KafkaVersion:
    """Kafka's ``ApiVersion(versionString)``: "0.10.0", "0.10.0-IV1", "0.10.0.1", "2.8", "2.8-IV1" and
    "2.8.2" are levels (the first three dot-separated parts count below 1.0, two from 1.0 on; a
    short name means its latest internal version). Raises ConfigError for anything else."""
    parts = text.strip().split(".")
    key = ".".join(parts[:3] if text.strip().startswith("0.") else parts[:2])
    version = _VERSIONS.get(key)
    if version is None:
        raise ConfigError(f"Version `{text}` is not a valid version")
    return version


#: Kafka's ApiVersion.minSupportedFor: the first level of each record version.
_MIN_LEVEL_FOR_RECORD_VERSION = {0: "0.8.0", 1: "0.10.0", 2: "0.11.0"}


def _kafka_version(name: str, value: Any) -> None:
    """Kafka's ApiVersionValidator: a level :func:`kafka_version` knows."""
    if value is None:
        return
    try:
        kafka_version(str(value))
    except ConfigError as exc:
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: {exc} (valid: "
                          f"{', '.join(n for n, _ in _VERSION_NAMES)}, or their short forms such as 0.10.0 or 2.8)"
                          ) from None


def between(low: float, high: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigError(f"Invalid value {value} for configuration {name}: must be between {low} and {high}")
    return check


IGNORED_NOTE = "Accepted, no effect in kafkalite"


@dataclass(frozen=True)
class ConfigKey:
    """One broker property. ``ignored``: Kafka has it and kafkalite accepts it (so existing
    ``server.properties`` files load and DescribeConfigs reports it), but nothing reads it; ``doc``
    then says why. Every other key is read by the broker with Kafka's meaning
    (tests/unit/test_config_truth.py holds both claims to the code)."""

    name: str
    kind: str                      # boolean | string | int | short | long | double | list | password
    default: Any
    doc: str
    validator: Callable[[str, Any], None] | None = None
    dynamic: bool = False          # Kafka allows changing it at runtime
    ignored: bool = False

    def parse(self, raw: Any) -> Any:
        value = _parse(self.name, self.kind, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    @property
    def documentation(self) -> str:
        """The doc as docs/configuration.md and DescribeConfigs show it (ignored keys say so first)."""
        return f"{IGNORED_NOTE}. {self.doc}" if self.ignored else self.doc


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}


_POLICIES = one_of("delete", "compact")
#: the authorizer.class.name values that select the ACL authorizer (Kafka 2.x names)
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Properties a listener may override as ``listener.name.<listener>.<property>`` (Kafka's
#: listener-prefixed configs); ``sasl.jaas.config`` also per mechanism:
#: ``listener.name.<listener>.<mechanism>.sasl.jaas.config``.
LISTENER_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                 "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password", "ssl.truststore.type",
                 "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
                 "ssl.client.auth", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
                 "sasl.jaas.config", "connection.failed.authentication.delay.ms", "connections.max.reauth.ms")
#: Kafka's per-broker dynamic configs (DynamicBrokerConfig.PerBrokerConfigs: the listener configs,
#: the SSL and SASL ones of DynamicListenerConfig): /config/brokers/<default> may not set them
#: ("Cannot update these configs at default cluster level, broker id must be specified").
PER_BROKER_KEYS = frozenset((
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds"))
#: Dynamic configs whose change re-binds listeners and re-writes the broker's registration.
LISTENER_RECONFIGURABLE = frozenset(("listeners", "advertised.listeners", "listener.security.protocol.map"))
_LISTENER_PREFIXED = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(?:([a-z0-9-]+)\.(?=sasl\.jaas\.config$))?(.+)$")
_TS_TYPES = one_of("CreateTime", "LogAppendTime")
_COMPRESSION = one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

BROKER_KEYS: dict[str, ConfigKey] = _keys(
    ConfigKey("broker.id", "int", -1, "This broker's id; -1 asks ZooKeeper for a generated one", at_least(-1)),
    ConfigKey("broker.id.generation.enable", "boolean", True, "Generate a broker id when broker.id is -1"),
    ConfigKey("reserved.broker.max.id", "int", 1000, "Generated ids start above this", at_least(0)),
    ConfigKey("broker.rack", "string", None, "Rack of this broker, for rack-aware replica assignment"),
    ConfigKey("listeners", "list", ["PLAINTEXT://:9092"],
              "Listener URIs to bind, NAME://host:port. Dynamic per broker: a new listener is bound, a removed one "
              "closed with its connections, and /brokers/ids/<id> re-written with the new endpoints", dynamic=True),
    ConfigKey("advertised.listeners", "list", None,
              "Listener URIs given to clients; defaults to listeners. Dynamic per broker: /brokers/ids/<id> is "
              "re-written, so clients and the other brokers see the new endpoints", dynamic=True),
    ConfigKey("listener.security.protocol.map", "string",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). Dynamic per broker "
              "(for new listeners: an existing listener keeps its protocol)", dynamic=True),
    ConfigKey("inter.broker.listener.name", "string", None,
              "Listener brokers use among themselves; defaults to the one of security.inter.broker.protocol"),
    ConfigKey("security.inter.broker.protocol", "string", "PLAINTEXT",
              "Security protocol among brokers when inter.broker.listener.name is unset", one_of(*SECURITY_PROTOCOLS)),
    # TLS (PEM stores, as Kafka 2.7+ accepts them); each may be given per listener as
    # listener.name.<listener>.<property>
    ConfigKey("ssl.keystore.type", "string", "PEM", "Key store format; kafkalite reads PEM", one_of("PEM")),
    ConfigKey("ssl.keystore.location", "string", None, "PEM file with the private key and its certificate chain"),
    ConfigKey("ssl.keystore.password", "password", None, "Refused with PEM key stores, as in Kafka "
              "(the key's password is ssl.key.password)"),
    ConfigKey("ssl.keystore.certificate.chain", "password", None, "The certificate chain in PEM, inline"),
    ConfigKey("ssl.keystore.key", "password", None, "The private key in PEM, inline"),
    ConfigKey("ssl.key.password", "password", None, "Password of an encrypted private key"),
    ConfigKey("ssl.truststore.type", "string", "PEM", "Trust store format; kafkalite reads PEM", one_of("PEM")),
    ConfigKey("ssl.truststore.location", "string", None, "PEM file of trusted CA certificates"),
    ConfigKey("ssl.truststore.password", "password", None, "Unused for PEM trust stores (Kafka refuses it too)"),
    ConfigKey("ssl.truststore.certificates", "password", None, "Trusted CA certificates in PEM, inline"),
    ConfigKey("ssl.client.auth", "string", "none", "Client certificates: none, requested or required",
              one_of("none", "requested", "required")),
    ConfigKey("ssl.endpoint.identification.algorithm", "string", "https",
              "Inter-broker TLS: 'https' checks the other broker's host name against its certificate, '' does not"),
    ConfigKey("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted",
              one_of("TLSv1.2", "TLSv1.3")),
    # SASL
    ConfigKey("sasl.enabled.mechanisms", "list", ["GSSAPI"],
              "SASL mechanisms offered on SASL listeners; kafkalite serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. "
              "Dynamic per broker: applies to the next connections", dynamic=True),
    ConfigKey("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism among brokers"),
    ConfigKey("sasl.jaas.config", "password", None,
              "JAAS login module entry (PlainLoginModule / ScramLoginModule): the broker's own username/password "
              "and, for PLAIN, its user_<name>=\"<password>\" users. Dynamic per broker (stored encrypted with "
              "password.encoder.secret): the PLAIN users apply to the next connections; the broker's own "
              "inter-broker login keeps the entry it started with", dynamic=True),
    # Kafka's PasswordEncoder: dynamic password configs are stored encrypted in ZooKeeper
    ConfigKey("password.encoder.secret", "password", None,
              "Secret that encrypts dynamic password configs (sasl.jaas.config) in /config/brokers/<id>; "
              "without it they cannot be set dynamically, as in Kafka"),
    ConfigKey("password.encoder.old.secret", "password", None,
              "Previous password.encoder.secret: stored passwords it decodes are still read (kafkalite does not "
              "re-encode them with the new secret as Kafka does at start-up; altering the config re-encodes it)"),
    ConfigKey("password.encoder.keyfactory.algorithm", "string", None,
              "PBKDF2 variant deriving the key: PBKDF2WithHmacSHA512 when unset, or PBKDF2WithHmacSHA256/SHA1"),
    ConfigKey("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding",
              "Cipher encrypting dynamic passwords: AES/CBC/PKCS5Padding or AES/GCM/NoPadding",
              one_of("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")),
    ConfigKey("password.encoder.key.length", "int", 128, "AES key length in bits (128, 192 or 256)",
              lambda name, value: _check_aes_key_length(name, value)),
    ConfigKey("password.encoder.iterations", "int", 4096, "PBKDF2 iterations", at_least(1024)),
    # Kerberos (GSSAPI) and OAUTHBEARER login settings: Kafka 2.8 accepts them, also as dynamic
    # per-broker configs (DynamicListenerConfig); kafkalite has neither mechanism
    *(ConfigKey(name, kind, default, f"Kerberos (GSSAPI) is not supported by kafkalite: stored and reported, "
                f"also as a dynamic per-broker config, as Kafka accepts it. Kafka: {doc}", check, dynamic=True,
                ignored=True)
      for name, kind, default, doc, check in (
          ("sasl.kerberos.service.name", "string", None, "the Kerberos principal name Kafka runs as", None),
          ("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "Kerberos kinit command path", None),
          ("sasl.kerberos.ticket.renew.window.factor", "double", 0.8,
           "the login thread sleeps until this fraction of the ticket's lifetime", None),
          ("sasl.kerberos.ticket.renew.jitter", "double", 0.05, "random jitter added to the renewal time", None),
          ("sasl.kerberos.min.time.before.relogin", "long", 60000,
           "login thread sleep time between refresh attempts", None),
          ("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"],
           "rules mapping Kerberos principal names to short names", None))),
    *(ConfigKey(name, kind, default, f"OAUTHBEARER is not supported by kafkalite: stored and reported, also as a "
                f"dynamic per-broker config, as Kafka accepts it. Kafka: {doc}", check, dynamic=True, ignored=True)
      for name, kind, default, doc, check in (
          ("sasl.login.refresh.window.factor", "double", 0.8,
           "the login refresh thread sleeps until this fraction of the credential's lifetime", between(0.5, 1.0)),
          ("sasl.login.refresh.window.jitter", "double", 0.05,
           "random jitter added to the login refresh thread's sleep", between(0.0, 0.25)),
          ("sasl.login.refresh.min.period.seconds", "short", 60,
           "minimum wait before the login refresh thread refreshes a credential", between(0, 900)),
          ("sasl.login.refresh.buffer.seconds", "short", 300,
           "buffer time before credential expiration kept when refreshing", between(0, 3600)))),
    ConfigKey("connection.failed.authentication.delay.ms", "int", 100,
              "Delay before the answer to a failed authentication and the close", at_least(0)),
    ConfigKey("connections.max.reauth.ms", "long", 0,
              "KIP-368: an authenticated SASL session lasts this long (told to the client in SaslAuthenticate); "
              "the client re-authenticates on the same connection or the next request closes it; 0: forever",
              at_least(0)),
    # authorization (Kafka's AclAuthorizer, ACLs in ZooKeeper)
    ConfigKey("authorizer.class.name", "string", "",
              "The authorizer: '' (none: every principal may do everything, the ACL APIs answer SECURITY_DISABLED) "
              "or kafka.security.authorizer.AclAuthorizer (kafka.security.auth.SimpleAclAuthorizer, its old name): "
              "Kafka's ACLs in /kafka-acl and /kafka-acl-extended", one_of("", *AUTHORIZER_CLASSES)),
    ConfigKey("super.users", "string", None,
              "Principals the authorizer lets do everything, separated by semicolons (User:admin;User:broker)"),
    ConfigKey("allow.everyone.if.no.acl.found", "boolean", False,
              "With an authorizer: a resource no ACL applies to is open to everyone (true) or to super users only"),
    ConfigKey("metrics.port", "int", 0,
              "kafkalite's own: HTTP port of this broker's Prometheus text at /metrics and JSON health at "
              "/health (Twisted Web); 0 turns both off. Kafka itself has JMX, scraped through the JMX "
              "exporter, whose metric names /metrics follows", between(0, 65535)),
    ConfigKey("metrics.host", "string", None,
              "kafkalite's own: interface the metrics.port endpoint binds; defaults to the first "
              "listener's host (all interfaces when that is empty)"),
    ConfigKey("host.name", "string", "", "Deprecated: host to bind when listeners is unset"),
    ConfigKey("port", "int", 9092, "Deprecated: port to bind when listeners is unset"),
    ConfigKey("log.dirs", "list", None, "Directories holding partition logs; overrides log.dir"),
    ConfigKey("log.dir", "string", "/tmp/kafka-logs", "Directory holding partition logs"),
    ConfigKey("zookeeper.connect", "string", None, "ZooKeeper host:port list with an optional /chroot"),
    ConfigKey("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout", at_least(1)),
    ConfigKey("zookeeper.connection.timeout.ms", "int", None, "Wait this long for ZooKeeper at start; defaults to the session timeout"),
    ConfigKey("zookeeper.set.acl", "boolean", False, "Create znodes with secure ACLs: the broker's ZooKeeper identity may change them, others only read (credentials and broker configs: not even that). Needs the ZooKeeper login of a JAAS Client section named in KAFKA_OPTS (-Djava.security.auth.login.config=...), used with ZooKeeper's digest scheme"),
    ConfigKey("num.partitions", "int", 1, "Partitions of an auto-created topic", at_least(1)),
    ConfigKey("default.replication.factor", "int", 1, "Replication factor of an auto-created topic", at_least(1)),
    ConfigKey("auto.create.topics.enable", "boolean", True, "Create unknown topics on Metadata requests"),
    ConfigKey("delete.topic.enable", "boolean", True, "Allow DeleteTopics"),
    ConfigKey("message.max.bytes", "int", 1048588, "Largest record batch accepted", at_least(0), True),
    ConfigKey("socket.request.max.bytes", "int", 104857600, "Largest request frame; larger closes the connection", at_least(1)),
    # kafkalite's default is -1, Kafka's 102400: one reactor thread serves every socket, so each
    # time a fixed buffer fills, the rest of a response (a 1 MB zero-copy Fetch answer: 3 more
    # waits) waits for a reactor turn behind other connections' requests; Kafka's network threads
    # pay those waits apart from its request handlers (ARCHITECTURE.md, "Zero-copy fetch")
    ConfigKey("socket.send.buffer.bytes", "int", -1,
              "SO_SNDBUF of accepted connections (-1 = OS default, sized by the kernel's autotuning). kafkalite's "
              "default; Kafka's is 102400: with one reactor thread a fixed buffer makes a large response wait "
              "for several reactor turns behind other requests"),
    ConfigKey("socket.receive.buffer.bytes", "int", -1,
              "SO_RCVBUF of the listening sockets and accepted connections (-1 = OS default, sized by the "
              "kernel's autotuning). kafkalite's default; Kafka's is 102400: with one reactor thread a fixed "
              "buffer splits a large Produce into more reads, each a reactor turn (scenario 8 with 1 KB records: "
              "1.39-1.85 against 1.63-2.20 broker CPU s/GB)"),
    ConfigKey("queued.max.requests", "int", 500,
              "Requests buffered per connection before reading pauses (Kafka counts them per broker)", at_least(1)),
    ConfigKey("connections.max.idle.ms", "long", 600000,
              "Close connections with no traffic and no request in progress for this long; negative never"),
    ConfigKey("max.connections", "int", INT_MAX,
              "Connections over all listeners; at the limit the listeners stop accepting until one closes "
              "(the inter-broker listener is exempt when there are several)", at_least(0)),
    ConfigKey("max.connections.per.ip", "int", INT_MAX, "Connections per client address; more are closed at once",
              at_least(0)),
    ConfigKey("max.connections.per.ip.overrides", "string", "",
              "Per-address (or host name) limits overriding max.connections.per.ip, e.g. hostName:100,127.0.0.1:200",
              lambda name, value: _check_connection_overrides(name, value)),
    ConfigKey("num.network.threads", "int", 3, "Kafka's network threads; one Twisted reactor serves every socket",
              at_least(1), ignored=True),
    ConfigKey("num.io.threads", "int", 8, "Kafka's request handler threads; requests run on the reactor thread",
              at_least(1), ignored=True),
    ConfigKey("num.recovery.threads.per.data.dir", "int", 1,
              "Kafka's log recovery threads; logs are recovered one after another before the broker serves",
              at_least(1), ignored=True),
    ConfigKey("num.replica.fetchers", "int", 1,
              "Fetchers per source broker, each with its own connection; a partition goes to fetcher "
              "abs(31 * topic.hashCode + partition) % N, as in Kafka", at_least(1)),
    ConfigKey("log.segment.bytes", "int", 1073741824, "Segment size before a roll", at_least(14), True),
    ConfigKey("log.roll.hours", "int", 168, "Roll a segment this old (hours)", at_least(1)),
    ConfigKey("log.roll.ms", "long", None, "Roll a segment this old; overrides log.roll.hours", at_least(1), True),
    ConfigKey("log.retention.hours", "int", 168, "Delete segments older than this (hours)"),
    ConfigKey("log.retention.minutes", "int", None, "Overrides log.retention.hours"),
    ConfigKey("log.retention.ms", "long", None, "Overrides log.retention.minutes; -1 keeps forever", None, True),
    ConfigKey("log.retention.bytes", "long", -1, "Delete old segments beyond this size per partition; -1 no limit", None, True),
    ConfigKey("log.retention.check.interval.ms", "long", 300000, "How often retention runs", at_least(1)),
    ConfigKey("log.segment.delete.delay.ms", "long", 60000, "Delay before a deleted segment's file is removed", at_least(0), True),
    ConfigKey("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages", at_least(1), True),
    ConfigKey("log.flush.interval.ms", "long", None, "fsync data older than this; defaults to log.flush.scheduler.interval.ms",
              at_least(0), True),
    ConfigKey("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks", at_least(0)),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", "int", 60000,
              "How often recovery points are checkpointed; kafkalite writes them with the high watermarks, every "
              "replica.high.watermark.checkpoint.interval.ms", at_least(0), ignored=True),
    ConfigKey("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries", at_least(0), True),
    ConfigKey("log.index.size.max.bytes", "int", 10485760, "Maximum offset index size", at_least(4), True),
    ConfigKey("log.cleanup.policy", "list", ["delete"], "delete and/or compact", _POLICIES, True),
    ConfigKey("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics"),
    ConfigKey("log.cleaner.threads", "int", 1, "Cleaner threads", at_least(0), True),
    ConfigKey("log.cleaner.backoff.ms", "long", 15000, "Sleep when there is nothing to clean", at_least(0), True),
    ConfigKey("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the cleaners' key -> offset maps (24 bytes per key)", at_least(1), True),
    ConfigKey("log.cleaner.io.buffer.size", "int", 524288, "Kafka's cleaner I/O buffers; cleaned batches are written in 1 MiB chunks",
              at_least(0), ignored=True),
    ConfigKey("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio that triggers cleaning", between(0, 1), True),
    ConfigKey("log.cleaner.delete.retention.ms", "long", 86400000, "Keep tombstones this long", at_least(0), True),
    ConfigKey("log.cleaner.min.compaction.lag.ms", "long", 0, "Never compact records younger than this", at_least(0), True),
    ConfigKey("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Compact records older than this", at_least(1), True),
    ConfigKey("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime", _TS_TYPES, True),
    ConfigKey("log.message.timestamp.difference.max.ms", "long", LONG_MAX,
              "Largest distance of a CreateTime record timestamp from broker time; a produce beyond it "
              "answers INVALID_TIMESTAMP naming the records", at_least(0), True),
    ConfigKey("log.message.format.version", "string", "2.8-IV1",
              "Message format of appended records for topics without message.format.version: below 0.10.0 "
              "magic 0, 0.10.x magic 1, from 0.11.0 record batch v2; at most inter.broker.protocol.version's",
              _kafka_version),
    ConfigKey("inter.broker.protocol.version", "string", "2.8-IV1",
              "Inter-broker protocol level: from 2.7 followers fetch with Fetch v12 and truncate on its diverging "
              "epoch (KIP-320); set an older level (e.g. 2.6) while rolling from a kafkalite that serves Fetch v11",
              _kafka_version),
    ConfigKey("log.preallocate", "boolean", False, "Preallocate segment files; segments grow as they are written",
              ignored=True),
    ConfigKey("compression.type", "string", "producer",
              "Codec batches are stored with; kafkalite always keeps the producer's codec (Kafka's producer)",
              _COMPRESSION, True, ignored=True),
    ConfigKey("min.insync.replicas", "int", 1, "ISR size acks=all needs", at_least(1), True),
    ConfigKey("unclean.leader.election.enable", "boolean", False, "Elect an out-of-sync replica as a last resort", None, True),
    ConfigKey("replica.lag.time.max.ms", "long", 30000, "Followers lagging longer leave the ISR", at_least(1)),
    ConfigKey("replica.fetch.max.bytes", "int", 1048576, "Bytes per partition a follower asks for", at_least(0)),
    ConfigKey("replica.fetch.response.max.bytes", "int", 10485760, "Bytes per follower fetch", at_least(0)),
    ConfigKey("replica.fetch.wait.max.ms", "int", 500, "Long-poll wait of follower fetches", at_least(0)),
    ConfigKey("replica.fetch.min.bytes", "int", 1, "Min bytes of follower fetches", at_least(1)),
    ConfigKey("replica.fetch.backoff.ms", "int", 1000, "Back-off after a follower fetch error", at_least(0)),
    ConfigKey("replica.socket.timeout.ms", "int", 30000, "Follower fetch socket timeout", at_least(1)),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "How often high watermarks are checkpointed", at_least(1)),
    ConfigKey("quota.window.num", "int", 11, "Samples kept for client quota rates", at_least(1)),
    ConfigKey("quota.window.size.seconds", "int", 1, "Time span of each client quota sample", at_least(1)),
    ConfigKey("leader.replication.throttled.rate", "long", LONG_MAX,
              "Bytes/s a leader sends to the replicas in leader.replication.throttled.replicas", at_least(0), True),
    ConfigKey("follower.replication.throttled.rate", "long", LONG_MAX,
              "Bytes/s a follower fetches for the replicas in follower.replication.throttled.replicas",
              at_least(0), True),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
              "Bytes/s the copying of future replicas between log dirs (AlterReplicaLogDirs) may move",
              at_least(1), True),
    ConfigKey("replication.quota.window.num", "int", 11, "Samples kept for replication quota rates", at_least(1)),
    ConfigKey("replication.quota.window.size.seconds", "int", 1, "Time span of each replication quota sample",
              at_least(1)),
    ConfigKey("controlled.shutdown.enable", "boolean", True, "Move leadership away before stopping"),
    ConfigKey("controlled.shutdown.max.retries", "int", 3, "Controlled shutdown attempts", at_least(0)),
    ConfigKey("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait between attempts", at_least(0)),
    ConfigKey("auto.leader.rebalance.enable", "boolean", True, "Move leadership back to preferred replicas"),
    ConfigKey("leader.imbalance.check.interval.seconds", "long", 300, "How often imbalance is checked", at_least(1)),
    ConfigKey("leader.imbalance.per.broker.percentage", "int", 10, "Imbalance that triggers rebalance", at_least(0)),
    ConfigKey("controller.socket.timeout.ms", "int", 30000,
              "Timeout of a broker's ControlledShutdown request to the controller (as in Kafka); kafkalite's "
              "controller itself sends brokers no requests", at_least(0)),
    ConfigKey("request.timeout.ms", "int", 30000,
              "Timeout of the transaction coordinator's WriteTxnMarkers requests to partition leaders and of its "
              "__transaction_state writes (controlled shutdown uses controller.socket.timeout.ms)", at_least(0)),
    ConfigKey("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets", at_least(1)),
    ConfigKey("offsets.topic.replication.factor", "short", 3, "Replication factor of __consumer_offsets", at_least(1)),
    ConfigKey("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets", at_least(1)),
    ConfigKey("offsets.topic.compression.codec", "int", 0,
              "Codec of __consumer_offsets records; they are written uncompressed", at_least(0), ignored=True),
    ConfigKey("offsets.retention.minutes", "int", 10080, "Keep committed offsets of empty groups this long", at_least(1)),
    ConfigKey("offsets.retention.check.interval.ms", "long", 600000, "How often expired offsets are removed", at_least(1)),
    ConfigKey("offsets.commit.required.acks", "short", -1, "acks of offset commits"),
    ConfigKey("offsets.commit.timeout.ms", "int", 5000, "Offset commit wait", at_least(1)),
    ConfigKey("offsets.load.buffer.size", "int", 5242880, "Read size when loading offsets", at_least(1)),
    ConfigKey("offset.metadata.max.bytes", "int", 4096, "Largest commit metadata string", at_least(0)),
    ConfigKey("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members of a new group"),
    ConfigKey("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask"),
    ConfigKey("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask"),
    ConfigKey("group.max.size", "int", INT_MAX, "Members per group", at_least(1)),
    ConfigKey("transactional.id.expiration.ms", "int", 604800000,
              "Expire a transactional id whose transaction has been idle (Empty or complete) this long", at_least(1)),
    ConfigKey("transaction.max.timeout.ms", "int", 900000,
              "Largest transaction.timeout.ms a producer may ask (larger: INVALID_TRANSACTION_TIMEOUT)", at_least(1)),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
              "How often transactions open longer than their timeout are aborted", at_least(1)),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
              "How often expired transactional ids are removed", at_least(1)),
    ConfigKey("transaction.state.log.replication.factor", "short", 3,
              "Replication factor of __transaction_state", at_least(1)),
    ConfigKey("transaction.state.log.min.isr", "int", 2,
              "min.insync.replicas of __transaction_state", at_least(1)),
    ConfigKey("transaction.state.log.num.partitions", "int", 50,
              "Partitions of __transaction_state", at_least(1)),
    ConfigKey("transaction.state.log.segment.bytes", "int", 104857600,
              "Segment size of __transaction_state", at_least(1)),
    ConfigKey("transaction.state.log.load.buffer.size", "int", 5242880,
              "Read size when loading __transaction_state", at_least(1)),
    ConfigKey("producer.id.expiration.ms", "int", 86400000,
              "Forget an idempotent producer's state (epoch, sequences) when its last batch is this old", at_least(1)),
    ConfigKey("producer.id.expiration.check.interval.ms", "int", 600000,
              "How often expired producer ids are removed", at_least(1)),
    ConfigKey("fetch.max.bytes", "int", 57671680,
              "Largest Fetch response: caps the request's max_bytes (a first batch above it still goes out, KIP-74)",
              at_least(1024)),
    ConfigKey("max.incremental.fetch.session.cache.slots", "int", 1000,
              "Fetch sessions (KIP-227) a broker keeps; a full fetch finding none free is sessionless", at_least(0)),
    ConfigKey("min.incremental.fetch.session.eviction.ms", "int", 120000,
              "A fetch session unused (or, for eviction by a bigger one, existing) this long may be evicted", at_least(0)),
    ConfigKey("metadata.max.age.ms", "long", 300000,
              "A client property, not a Kafka broker one; accepted so shared property files load", ignored=True),
)


def _hours(v: Any) -> Any:
    return v * 3600000 if v is not None and v >= 0 else v


def _minutes(v: Any) -> Any:
    return v * 60000 if v is not None and v >= 0 else v


def _throttled_replicas(name: str, value: Any) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs, comma-separated."""
    text = (value or "").strip()
    if text in ("", "*"):
        return
    if not all(re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", item) for item in text.split(",")):
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: must be the literal '*' or a list "
                          "of replicas in the format [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],...")


SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

_INT_LIMITS = {"int": INT_MAX, "short": 32767, "long": LONG_MAX}


@dataclass(frozen=True)
class TopicKey:
    """One topic property: Kafka's name and type, its broker synonyms in precedence order (a
    topic's default is the first synonym the broker's properties set, else the first synonym's
    default, else ``fallback``), and who reads it: ``field`` names the ``storage.LogConfig`` field
    that carries it into the log (built from the typed values, no strings in between); keys without
    a field are read by the broker (``min.insync.replicas``) or are ``ignored`` (accepted, reported
    by DescribeConfigs, no effect)."""

    name: str
    kind: str
    synonyms: tuple[str, ...]
    doc: str
    validator: Callable[[str, Any], None] | None = None
    field: str | None = None
    ignored: bool = False
    fallback: Any = None

    def parse(self, raw: Any) -> Any:
        value = _parse(self.name, self.kind, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def check(self, value: Any) -> None:
        """Validate an already typed value (storage's LogConfig built from Python values)."""
        limit = _INT_LIMITS.get(self.kind)
        if limit is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not -limit - 1 <= value <= limit):
            raise ConfigError(f"Invalid value {value!r} for configuration {self.name}: expected {self.kind}")
        if self.validator is not None:
            self.validator(self.name, value)

    @property
    def documentation(self) -> str:
        return f"{IGNORED_NOTE}. {self.doc}" if self.ignored else self.doc


TOPIC_KEYS: dict[str, TopicKey] = {k.name: k for k in (
    TopicKey("cleanup.policy", "list", ("log.cleanup.policy",), "delete and/or compact", _POLICIES,
             field="cleanup_policy"),
    TopicKey("compression.type", "string", ("compression.type",),
             "Codec batches are stored with; kafkalite always keeps the producer's codec (Kafka's producer)",
             _COMPRESSION, ignored=True),
    TopicKey("delete.retention.ms", "long", ("log.cleaner.delete.retention.ms",), "Keep tombstones this long",
             at_least(0), field="delete_retention_ms"),
    TopicKey("file.delete.delay.ms", "long", ("log.segment.delete.delay.ms",), "Delay before deleting segment files",
             at_least(0), field="file_delete_delay_ms"),
    TopicKey("flush.messages", "long", ("log.flush.interval.messages",), "fsync after this many messages",
             at_least(0), field="flush_messages"),
    TopicKey("flush.ms", "long", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
             "fsync data older than this", at_least(0), field="flush_ms"),
    TopicKey("index.interval.bytes", "int", ("log.index.interval.bytes",), "Bytes between index entries",
             at_least(0), field="index_interval_bytes"),
    TopicKey("max.compaction.lag.ms", "long", ("log.cleaner.max.compaction.lag.ms",), "Compact records older than this",
             at_least(1), field="max_compaction_lag_ms"),
    TopicKey("max.message.bytes", "int", ("message.max.bytes",), "Largest record batch", at_least(0),
             field="max_message_bytes"),
    TopicKey("message.timestamp.difference.max.ms", "long", ("log.message.timestamp.difference.max.ms",),
             "Largest distance of a CreateTime record timestamp from broker time; a produce beyond it "
             "answers INVALID_TIMESTAMP naming the records", at_least(0)),
    TopicKey("message.timestamp.type", "string", ("log.message.timestamp.type",), "CreateTime or LogAppendTime",
             _TS_TYPES, field="message_timestamp_type"),
    TopicKey("min.cleanable.dirty.ratio", "double", ("log.cleaner.min.cleanable.ratio",),
             "Dirty ratio that triggers cleaning", between(0, 1), field="min_cleanable_dirty_ratio"),
    TopicKey("min.compaction.lag.ms", "long", ("log.cleaner.min.compaction.lag.ms",), "Never compact younger records",
             at_least(0), field="min_compaction_lag_ms"),
    TopicKey("min.insync.replicas", "int", ("min.insync.replicas",), "ISR size acks=all needs", at_least(1)),
    TopicKey("preallocate", "boolean", ("log.preallocate",),
             "Preallocate segment files; segments grow as they are written", ignored=True),
    TopicKey("retention.bytes", "long", ("log.retention.bytes",), "Size limit per partition; -1 none",
             field="retention_bytes"),
    TopicKey("retention.ms", "long", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
             "Time limit; -1 none", at_least(-1), field="retention_ms"),
    TopicKey("segment.bytes", "int", ("log.segment.bytes",), "Segment size", at_least(14), field="segment_bytes"),
    TopicKey("segment.index.bytes", "int", ("log.index.size.max.bytes",), "Index size", at_least(4),
             field="segment_index_bytes"),
    TopicKey("segment.ms", "long", ("log.roll.ms", "log.roll.hours"), "Segment age before roll", at_least(1),
             field="segment_ms"),
    TopicKey("unclean.leader.election.enable", "boolean", ("unclean.leader.election.enable",),
             "Elect out-of-sync replicas"),
    TopicKey("message.format.version", "string", ("log.message.format.version",),
             "Message format records are appended in (Kafka's version strings, e.g. 0.10.0): below 0.10.0 magic 0 "
             "(no timestamps), 0.10.x magic 1, from 0.11.0 v2; v0/v1 refuse idempotent, transactional and header "
             "records and are fetched as such. A level above inter.broker.protocol.version is ignored (warning)",
             _kafka_version),
    TopicKey("message.downconversion.enable", "boolean", (),
             "Down-convert for old consumers; Fetch is served from v4, which reads batches as stored",
             ignored=True, fallback=True),
    TopicKey("follower.replication.throttled.replicas", "string", (),
             "partition:broker pairs (or *) whose follower fetches count against follower.replication.throttled.rate",
             _throttled_replicas, fallback=""),
    TopicKey("leader.replication.throttled.replicas", "string", (),
             "partition:broker pairs (or *) whose leader sends count against leader.replication.throttled.rate",
             _throttled_replicas, fallback=""),
)}

#: Broker synonyms in another unit than their topic key (Kafka's hours/minutes -> ms).
_SYNONYM_UNITS: dict[str, Callable[[Any], Any]] = {
    "log.retention.minutes": _minutes, "log.retention.hours": _hours, "log.roll.hours": _hours,
}


def _resolve_topic(key: TopicKey, explicit: Mapping[str, Any] | list[tuple[Mapping[str, Any], int]]
                   ) -> tuple[Any, int, tuple[tuple[str, Any, int], ...]]:
    """(value, source, synonyms) of a topic key with no override, given the broker properties
    set explicitly (one mapping of static ones, or layers of (properties, source) in precedence
    order: dynamic per-broker, dynamic cluster default, static): the first synonym some layer
    sets, else the first synonym with a default, else the key's fallback (Kafka's resolution)."""
    layers = [(explicit, SOURCE_STATIC_BROKER)] if isinstance(explicit, Mapping) else explicit
    synonyms = []
    chosen: tuple[Any, int] | None = None
    for syn in key.synonyms:
        for props, source in layers:
            if props.get(syn) is not None:
                synonyms.append((syn, props[syn], source))
                if chosen is None:
                    chosen = (_SYNONYM_UNITS.get(syn, _same)(props[syn]), source)
    for syn in key.synonyms:
        d = BROKER_KEYS[syn].default
        if d is not None:
            synonyms.append((syn, d, SOURCE_DEFAULT))
            if chosen is None:
                chosen = (_SYNONYM_UNITS.get(syn, _same)(d), SOURCE_DEFAULT)
    if chosen is None:
        chosen = (key.fallback, SOURCE_DEFAULT)
    return chosen[0], chosen[1], tuple(synonyms)


def _same(v: Any) -> Any:
    return v


#: Kafka's topic defaults (no broker property set): storage's LogConfig takes its field defaults here.
TOPIC_DEFAULTS: dict[str, Any] = {name: _resolve_topic(key, {})[0] for name, key in TOPIC_KEYS.items()}


def _check_aes_key_length(name: str, value: Any) -> None:
    if value not in (128, 192, 256):
        raise ConfigError(f"Invalid value {value} for configuration {name}: must be 128, 192 or 256")


def _check_connection_overrides(name: str, value: Any) -> None:
    parse_connection_overrides(value, name)


def parse_connection_overrides(text: str | None, name: str = "max.connections.per.ip.overrides") -> dict[str, int]:
    """``host:count,host:count`` -> {host: count} (Kafka's max.connections.per.ip.overrides); the
    count follows the last ':' so IPv6 addresses work."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            if not sep or not host.strip():
                raise ValueError
            value = int(count)
            if value < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(f"Invalid value {item!r} for configuration {name}: expected host:count "
                              "with a count of at least 0") from None
        out[host.strip().strip("[]")] = value
    return out


def render(value: Any) -> str | None:
    """A config value as Kafka prints it (lists comma-joined, booleans lower case)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ConfigValue:
    """One resolved setting, as DescribeConfigs reports it."""

    name: str
    value: Any
    source: int                  # 1 topic override, 4 static broker config, 5 default
    synonyms: tuple[tuple[str, Any, int], ...] = ()
    kind: str = "string"
    doc: str = ""
    sensitive: bool = False


@dataclass
class Endpoint:
    listener: str
    host: str
    port: int

    def uri(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(-?\d+)$")


def parse_listener(uri: str) -> Endpoint:
    m = _LISTENER_RE.match(uri)
    if not m:
        raise ConfigError(f"Invalid listener {uri!r}: expected NAME://host:port")
    return Endpoint(m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3)))


@dataclass
class BrokerConfig:
    """Parsed ``server.properties``: ``cfg["log.retention.ms"]`` gives the typed value."""

    values: dict[str, Any]
    explicit: set[str] = field(default_factory=set)      # keys the properties file set

    #: ``listener.name.<listener>.[<mechanism>.]<property>`` -> typed value (see LISTENER_KEYS)
    prefixed: dict[str, Any] = field(default_factory=dict)
    #: dynamic broker configs from ZooKeeper (``/config/brokers/<id>`` and ``/config/brokers/<default>``),
    #: typed; they win over ``values`` in that order (Kafka's DynamicBrokerConfig)
    dynamic_broker: dict[str, Any] = field(default_factory=dict)
    dynamic_default: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "BrokerConfig":
        values: dict[str, Any] = {}
        prefixed: dict[str, Any] = {}
        for name, raw in props.items():
            key = BROKER_KEYS.get(name)
            if key is None:
                m = _LISTENER_PREFIXED.match(name)
                if m is None or m.group(3) not in LISTENER_KEYS:
                    raise ConfigError(f"Unknown configuration {name!r}")
                prefixed[name] = BROKER_KEYS[m.group(3)].parse(raw)
                continue
            values[name] = key.parse(raw)
        cfg = cls({n: values.get(n, k.default) for n, k in BROKER_KEYS.items()}, set(values), prefixed)
        cfg._check()
        return cfg

    def listener_config(self, listener: str) -> "ListenerConfig":
        """The properties as one listener sees them (its ``listener.name.<listener>.`` overrides first)."""
        return ListenerConfig(self, listener)

    def jaas_config(self, listener: str, mechanism: str) -> Any:
        """The parsed JAAS entry (``kafkalite.security.jaas.JaasEntry``, None if none is set) for
        ``mechanism`` on ``listener``: ``listener.name.<l>.<mechanism>.sasl.jaas.config``, then
        ``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config`` (Kafka's order)."""
        from kafkalite.security import jaas

        prefix = f"listener.name.{listener.lower()}."
        text = self.prefixed.get(f"{prefix}{mechanism.lower()}.sasl.jaas.config")
        if text is None:
            text = self.prefixed.get(f"{prefix}sasl.jaas.config", self["sasl.jaas.config"])
        return jaas.parse(text) if text else None

    @property
    def inter_broker_listener(self) -> str:
        """Kafka's rule: ``inter.broker.listener.name``, else the listener named like
        ``security.inter.broker.protocol`` (PLAINTEXT by default), else the first listener."""
        name = self["inter.broker.listener.name"]
        if name:
            return str(name).upper()
        wanted = self["security.inter.broker.protocol"]
        names = [ep.listener for ep in self.listeners]
        return wanted if wanted in names else names[0]

    def _check_security(self, names: list[str]) -> None:
        from kafkalite.security import jaas

        protocols = self.security_protocols()
        for name in names:
            proto = protocols.get(name)
            if proto is None:
                raise ConfigError(f"Listener {name} is not in listener.security.protocol.map")
            if proto not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Listener {name}: unknown security protocol {proto!r}")
        if "inter.broker.listener.name" in self.explicit and "security.inter.broker.protocol" in self.explicit:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
        if self["inter.broker.listener.name"] and self.inter_broker_listener not in names:
            raise ConfigError(f"inter.broker.listener.name must be a listener name defined in listeners "
                              f"(got {self['inter.broker.listener.name']})")
        for name in names:
            lc = self.listener_config(name)
            proto = protocols[name]
            if proto in ("SSL", "SASL_SSL"):
                if not (lc["ssl.keystore.location"] or (lc["ssl.keystore.certificate.chain"] and lc["ssl.keystore.key"])):
                    raise ConfigError(f"Listener {name} ({proto}) needs ssl.keystore.location or "
                                      "ssl.keystore.certificate.chain and ssl.keystore.key")
                if lc["ssl.keystore.location"] and lc["ssl.keystore.certificate.chain"]:
                    raise ConfigError(f"Listener {name}: set ssl.keystore.location or ssl.keystore.certificate.chain, "
                                      "not both")
            if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
                mechanisms = lc["sasl.enabled.mechanisms"] or []
                if not mechanisms:
                    raise ConfigError(f"Listener {name}: sasl.enabled.mechanisms is empty")
                for mech in mechanisms:
                    if mech not in SASL_MECHANISMS:
                        raise ConfigError(f"Listener {name}: SASL mechanism {mech} is not supported by kafkalite "
                                          f"(set sasl.enabled.mechanisms to some of {', '.join(SASL_MECHANISMS)})")
                    try:
                        entry = lc.jaas(mech)
                    except jaas.JaasError as exc:
                        raise ConfigError(str(exc)) from None
                    if mech == "PLAIN" and (entry is None or not entry.plain_users()):
                        raise ConfigError(f"Listener {name}: PLAIN needs a sasl.jaas.config with "
                                          f"user_<name>=\"<password>\" entries "
                                          f"(listener.name.{name.lower()}.plain.sasl.jaas.config)")
        inter = self.inter_broker_listener
        if protocols.get(inter) in ("SASL_PLAINTEXT", "SASL_SSL"):
            lc = self.listener_config(inter)
            mech = self["sasl.mechanism.inter.broker.protocol"]
            if mech not in (lc["sasl.enabled.mechanisms"] or []):
                raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mech} must be in the inter-broker "
                                  f"listener's sasl.enabled.mechanisms")
            entry = lc.jaas(mech)
            if entry is None or entry.username is None or entry.password is None:
                raise ConfigError(f"The inter-broker listener {inter} needs a sasl.jaas.config for {mech} with "
                                  "the broker's own username and password")

    def __getitem__(self, name: str) -> Any:
        if name in self.dynamic_broker:
            return self.dynamic_broker[name]
        if name in self.dynamic_default:
            return self.dynamic_default[name]
        return self.values[name]

    def set_dynamic(self, broker: Mapping[str, str], default: Mapping[str, str],
                    check: Callable[["BrokerConfig"], None] | None = None) -> set[str]:
        """Replace the dynamic layers with these ZooKeeper configs (strings as stored); fires
        nothing, returns the names whose effective value changed. A key that is unknown, not
        dynamic or invalid, or a per-broker key at the cluster default, is skipped with a warning,
        as Kafka skips it. Configs that together are invalid (e.g. listeners without the
        inter-broker one, written by another tool), or that ``check`` (the broker's
        reconfigurables) refuses with a ConfigError, leave the broker's config as it was, as
        Kafka's updateCurrentConfig keeps its old config then."""
        before = {n: self[n] for n in set(self.dynamic_broker) | set(self.dynamic_default)
                  | set(broker) | set(default) if n in BROKER_KEYS}
        new_broker = parse_dynamic(broker, "this broker's dynamic config")
        new_default = parse_dynamic(default, "the cluster-wide dynamic config", per_broker=False)
        candidate = replace(self, dynamic_broker=new_broker, dynamic_default=new_default)
        try:
            self.check_reconfiguration(candidate)
            if check is not None:
                check(candidate)
        except ConfigError as exc:
            log.error("dynamic broker configs %s / default %s ignored: %s", sorted(broker), sorted(default), exc)
            return set()
        self.dynamic_broker, self.dynamic_default = new_broker, new_default
        return {n for n, v in before.items() if self[n] != v}

    def validate_dynamic(self, config: Mapping[str, str], per_broker: bool) -> "BrokerConfig":
        """Kafka's DynamicBrokerConfig.validate for a new ``/config/brokers/<id>`` (``per_broker``)
        or ``/config/brokers/<default>`` config, given as strings: every key dynamic, no per-broker
        key at the default, valid values, and the broker config they make valid as a whole and as
        a change of this one (see :meth:`check_reconfiguration`). Raises ConfigError; returns the
        config the broker would run with (for the reconfigurables' own checks)."""
        static = sorted(n for n in config if n not in BROKER_KEYS or not BROKER_KEYS[n].dynamic)
        if static:
            raise ConfigError(f"Cannot update these configs dynamically: {', '.join(static)}")
        if not per_broker:
            only_per_broker = sorted(n for n in config if n in PER_BROKER_KEYS)
            if only_per_broker:
                raise ConfigError("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: {', '.join(only_per_broker)}")
        typed = {n: BROKER_KEYS[n].parse(v) for n, v in config.items()}
        if per_broker:
            candidate = replace(self, dynamic_broker=typed)
        else:
            candidate = replace(self, dynamic_default=typed)
        self.check_reconfiguration(candidate)
        return candidate

    def check_reconfiguration(self, new: "BrokerConfig") -> None:
        """Is ``new`` (this config with other dynamic layers) valid, and a change the running broker
        can make (Kafka's KafkaConfig checks plus DynamicListenerConfig.validateReconfiguration)?
        Listeners may be added and removed, but every listener needs a security protocol, an
        existing listener keeps its protocol, the advertised listeners are a subset of the
        listeners and include the inter-broker listener, which stays the same."""
        names = [ep.listener for ep in new.listeners]
        old_protocols, new_protocols = self.security_protocols(), new.security_protocols()
        for ep in self.listeners:
            if ep.listener in names and old_protocols.get(ep.listener) != new_protocols.get(ep.listener):
                raise ConfigError(f"Security protocol cannot be updated for existing listener {ep.listener}")
        new._check()
        inter = self.inter_broker_listener
        if new.inter_broker_listener != inter or inter not in names:
            raise ConfigError(f"The inter-broker listener {inter} must stay a listener (it cannot be removed or "
                              "replaced dynamically)")

    def _layers(self) -> list[tuple[Mapping[str, Any], int]]:
        return [(self.dynamic_broker, SOURCE_DYNAMIC_BROKER), (self.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
                ({n: self.values[n] for n in self.explicit}, SOURCE_STATIC_BROKER)]

    def _check(self) -> None:
        if not self["zookeeper.connect"]:
            raise ConfigError("Missing required configuration 'zookeeper.connect'")
        listeners = self.listeners
        if not listeners:
            raise ConfigError("Configuration 'listeners' names no listener")
        names = [ep.listener for ep in listeners]
        if len(set(names)) != len(names):
            raise ConfigError("Each listener name may appear only once in 'listeners'")
        for lc in (self.listener_config(n) for n in names):
            # kafkalite reads PEM stores only (Kafka 2.7+'s PEM support, KIP-651); like Kafka it
            # refuses a password on a PEM trust store
            for store in ("ssl.keystore.type", "ssl.truststore.type"):
                if lc[store] != "PEM":
                    raise ConfigError(f"{store}={lc[store]} is not supported: kafkalite reads PEM stores only")
            if lc["ssl.truststore.password"] is not None:
                raise ConfigError("ssl.truststore.password cannot be specified for PEM trust stores (as in Kafka)")
            if lc["ssl.keystore.password"] is not None:
                raise ConfigError("ssl.keystore.password cannot be specified with PEM key stores, only ssl.key.password "
                                  "(as in Kafka)")
        self._check_security(names)
        # Kafka's KafkaConfig.validateValues: the broker's default format needs an inter-broker
        # level that knows its record version
        fmt = kafka_version(self["log.message.format.version"])
        if fmt.record_version > kafka_version(self["inter.broker.protocol.version"]).record_version:
            raise ConfigError(f"log.message.format.version {self['log.message.format.version']} can only be used when "
                              "inter.broker.protocol.version is set to version "
                              f"{_MIN_LEVEL_FOR_RECORD_VERSION[fmt.record_version]} or higher")
        if self["max.connections.per.ip"] == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "is set (as in Kafka)")
        advertised = self.advertised_listeners
        if any(ep.port <= 0 for ep in advertised if ep.listener in names and self["advertised.listeners"]):
            raise ConfigError("advertised.listeners needs a real port for every listener")
        # Kafka's KafkaConfig.validateValues: what is registered in /brokers/ids/<id> is exactly
        # the advertised listeners, so they must be listeners and include the inter-broker one
        adv_names = [ep.listener for ep in advertised]
        if len(set(adv_names)) != len(adv_names):
            raise ConfigError("Each listener name may appear only once in 'advertised.listeners'")
        if not set(adv_names) <= set(names):
            raise ConfigError(f"advertised.listeners listener names must be equal to or a subset of the ones defined "
                              f"in listeners. Found {','.join(adv_names)}. The valid options based on the current "
                              f"configuration are {','.join(names)}")
        if self.inter_broker_listener not in adv_names:
            raise ConfigError(f"inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                              f"The valid options based on currently configured listeners are {','.join(adv_names)}")
        if self["advertised.listeners"] and any(ep.host == "0.0.0.0" for ep in advertised):
            raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                              "Use a routable IP address.")

    def security_protocols(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as {LISTENER: PROTOCOL}."""
        return _protocol_map(self["listener.security.protocol.map"])

    def security_protocol(self, listener: str) -> str:
        """The protocol ``listener.security.protocol.map`` gives ``listener``."""
        return _protocol_map(self["listener.security.protocol.map"]).get(listener, listener)

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def listeners(self) -> list[Endpoint]:
        uris = self["listeners"]
        if "listeners" not in self.explicit and "listeners" not in self.dynamic_broker \
                and ("port" in self.explicit or "host.name" in self.explicit):
            uris = [f"PLAINTEXT://{self['host.name']}:{self['port']}"]
        return [parse_listener(u) for u in uris]

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        if self["advertised.listeners"]:
            return [parse_listener(u) for u in self["advertised.listeners"]]
        return self.listeners

    @property
    def log_dirs(self) -> list[str]:
        return self["log.dirs"] or [self["log.dir"]]

    @property
    def zookeeper_session_timeout_ms(self) -> int:
        return self["zookeeper.session.timeout.ms"]

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        return parse_connection_overrides(self["max.connections.per.ip.overrides"])

    # -- topic defaults ------------------------------------------------------------------------
    def topic_default(self, name: str) -> tuple[Any, int, tuple[tuple[str, Any, int], ...]]:
        """(value, source, synonyms) of a topic key with no override, resolved as Kafka does."""
        return _resolve_topic(TOPIC_KEYS[name], self._layers())

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Every topic key's effective typed value: override, else the broker's default. An
        override name kafkalite does not know (another tool wrote it to ZooKeeper) is skipped, as
        Kafka's LogConfig ignores unknown properties."""
        out = {name: self.topic_default(name)[0] for name in TOPIC_KEYS}
        for name, raw in (overrides or {}).items():
            key = TOPIC_KEYS.get(name)
            if key is None:
                log.warning("ignoring unknown topic config %s=%r", name, raw)
                continue
            value = key.parse(raw)
            if name == "message.format.version" and not self._format_allowed(value):
                continue
            out[name] = value
        return out

    def _format_allowed(self, value: str) -> bool:
        """Kafka's TopicConfigHandler.excludedConfigs: a topic's message.format.version above the
        inter-broker level is ignored (the broker's default applies), with a warning; Kafka 2.8
        accepts it at CreateTopics/AlterConfigs, so kafkalite does too."""
        ibp = self["inter.broker.protocol.version"]
        if kafka_version(value).rank <= kafka_version(ibp).rank:
            return True
        log.warning("topic config message.format.version=%s is ignored: it is not compatible with "
                    "inter.broker.protocol.version %s", value, ibp)
        return False

    def describe_topic(self, overrides: Mapping[str, str]) -> list[ConfigValue]:
        rows = []
        for name, key in TOPIC_KEYS.items():
            default, source, synonyms = self.topic_default(name)
            if name in overrides:
                value = key.parse(overrides[name])
                rows.append(ConfigValue(name, value, SOURCE_DYNAMIC_TOPIC,
                                        ((name, value, SOURCE_DYNAMIC_TOPIC),) + synonyms, key.kind, key.documentation))
            else:
                rows.append(ConfigValue(name, default, source, synonyms, key.kind, key.documentation))
        return rows

    def describe_broker(self) -> list[ConfigValue]:
        """Every broker key with its effective value, source and synonyms (dynamic per-broker,
        dynamic default, static, default: Kafka's order)."""
        rows = []
        layers = self._layers()
        for name, key in BROKER_KEYS.items():
            synonyms = [(name, props[name], src) for props, src in layers if name in props]
            if key.default is not None or not synonyms:
                synonyms.append((name, key.default, SOURCE_DEFAULT))
            rows.append(ConfigValue(name, self[name], synonyms[0][2], tuple(synonyms),
                                    key.kind, key.documentation, key.kind == "password"))
        return rows

    def describe_dynamic_default(self) -> list[ConfigValue]:
        """The cluster default entity's own configs (DescribeConfigs of broker "")."""
        return [ConfigValue(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER, ((name, value, SOURCE_DYNAMIC_DEFAULT_BROKER),),
                            BROKER_KEYS[name].kind, BROKER_KEYS[name].documentation)
                for name, value in self.dynamic_default.items()]


def parse_dynamic(config: Mapping[str, str], where: str, per_broker: bool = True) -> dict[str, Any]:
    """Typed values of the dynamic keys in a ``/config/brokers/...`` config; others are skipped,
    and so are per-broker keys in the cluster default's (``per_broker`` False), as Kafka does."""
    out: dict[str, Any] = {}
    for name, raw in config.items():
        key = BROKER_KEYS.get(name)
        if key is None or not key.dynamic:
            log.warning("%s: ignoring %s (not a dynamic broker config)", where, name)
            continue
        if not per_broker and name in PER_BROKER_KEYS:
            log.warning("%s: ignoring %s (a per-broker config defined at the default cluster level)", where, name)
            continue
        try:
            out[name] = key.parse(raw)
        except ConfigError as exc:
            log.warning("%s: ignoring %s", where, exc)
    return out


def _protocol_map(text: str) -> dict[str, str]:
    return {k.strip().upper(): v.strip().upper() for k, v in
            (item.split(":", 1) for item in text.split(",") if ":" in item)}


class ListenerConfig:
    """One listener's view of the broker properties: ``lc["ssl.keystore.location"]`` is
    ``listener.name.<listener>.ssl.keystore.location`` when set, else the broker-wide value, as
    Kafka resolves listener-prefixed configs."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.config = config
        self.listener = listener
        self.prefix = f"listener.name.{listener.lower()}."

    @property
    def security_protocol(self) -> str:
        return self.config.security_protocol(self.listener)

    def __getitem__(self, name: str) -> Any:
        if name not in LISTENER_KEYS:
            return self.config[name]
        return self.config.prefixed.get(self.prefix + name, self.config[name])

    def jaas(self, mechanism: str) -> Any:
        return self.config.jaas_config(self.listener, mechanism)


def validate_topic_overrides(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check CreateTopics/AlterConfigs topic settings; raises ConfigError naming the bad one."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic config {name}")
        key.parse(raw)
        out[name] = raw
    return out


def parse_properties_text(text: str) -> dict[str, str]:
    """Java-style .properties: key=value or key: value, # and ! comments, backslash continuations."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        while stripped.endswith("\\") and not stripped.endswith("\\\\"):
            stripped = stripped[:-1] + next(lines, "").strip()
        m = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", stripped)
        if not m:
            props[stripped] = ""
            continue
        props[m.group(1).replace("\\", "")] = m.group(2)
    return props


def load_properties(paths: Iterable[str] = (), overrides: Iterable[str] = ()) -> dict[str, str]:
    props: dict[str, str] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            props.update(parse_properties_text(f.read()))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"Invalid override {item!r}: expected key=value")
        k, v = item.split("=", 1)
        props[k.strip()] = v
    return props
