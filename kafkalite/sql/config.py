"""``ksql-server.properties`` with ksqlDB's names (``KsqlRestConfig`` / ``KsqlConfig``): ``listeners``,
``bootstrap.servers``, ``ksql.service.id``, ``ksql.schema.registry.url``, ``ksql.streams.state.dir``,
``ksql.streams.*`` (``auto.offset.reset``, ``commit.interval.ms``...), plus ``spark.master`` and
any ``spark.*`` setting for the Spark session that runs the queries.

Kafka's client security properties (``security.protocol``, ``ssl.*``, ``sasl.*``) stand at the top
level, as in ksqlDB, and are kept as given: ksqlDB hands every one of them to the Kafka Streams
clients of its queries, and the server hands them, ``kafka.``-prefixed, to its Spark queries."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from kafkalite.client.errors import ClientError
from kafkalite.client.security import ClientSecurity, is_security_key


class ConfigError(ValueError):
    """A property with a bad value: the server says which and stops."""


@dataclass(frozen=True)
class KsqlConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    service_id: str = "default_"
    listeners: tuple[str, ...] = ("http://0.0.0.0:8088",)
    schema_registry_url: str | None = None
    state_dir: str = field(default_factory=lambda: str(Path(tempfile.gettempdir()) / "kafkalite-ksql"))
    spark_master: str = "local[2]"
    spark_conf: tuple[tuple[str, str], ...] = ()
    streams: tuple[tuple[str, str], ...] = ()        # ksql.streams.* with the prefix stripped
    #: Kafka's client security properties by their upstream names (a client certificate for mutual
    #: TLS, ``ssl.endpoint.identification.algorithm`` and SASL included): one source for the
    #: server's own clients (:attr:`security`) and its Spark queries' ``kafka.*`` options
    security_properties: tuple[tuple[str, str], ...] = ()
    # a failed persistent query is restarted after a back-off that doubles up to the max (KsqlConfig)
    retry_backoff_initial_ms: int = 15000         # ksql.query.retry.backoff.initial.ms
    retry_backoff_max_ms: int = 900000            # ksql.query.retry.backoff.max.ms
    # a TIMESTAMP column null or negative in a record: skip the record (false) or fail the query
    timestamp_throw_on_invalid: bool = False      # ksql.timestamp.throw.on.invalid
    fail_on_deserialization_error: bool = False   # ksql.fail.on.deserialization.error
    processing_log_rows_include: bool = False     # ksql.logging.processing.rows.include
    #: ksqlDB's ProcessingLogConfig: the processing log also written to a topic the server creates
    #: at start (``ksql.logging.processing.topic.*``), and a stream over it (``.stream.*``)
    processing_log_topic_auto_create: bool = False        # ksql.logging.processing.topic.auto.create
    processing_log_topic_name: str = ""                   # ksql.logging.processing.topic.name ("": the default)
    processing_log_topic_partitions: int = 1              # ksql.logging.processing.topic.partitions
    processing_log_topic_replication_factor: int = 1      # ksql.logging.processing.topic.replication.factor
    processing_log_stream_auto_create: bool = False       # ksql.logging.processing.stream.auto.create
    processing_log_stream_name: str = "KSQL_PROCESSING_LOG"   # ksql.logging.processing.stream.name
    insert_values_enabled: bool = True            # ksql.insert.into.values.enabled (and /inserts-stream)
    #: ksql.idle.connection.timeout.seconds: a connection with no data either way for this long is
    #: closed (ksqlDB's default, 10 minutes, lets a push query wait that long between rows)
    idle_connection_timeout_s: int = 600

    @property
    def security(self) -> ClientSecurity:
        """TLS/SASL of the server's own clients (command topic, admin, INSERT producers, PRINT,
        pull-query state), from :attr:`security_properties`."""
        return ClientSecurity.from_properties(dict(self.security_properties))

    @property
    def processing_log_topic(self) -> str:
        """``ksql.logging.processing.topic.name``, by default ``<ksql.service.id>ksql_processing_log``
        (ksqlDB's ``ReservedInternalTopics.processingLogTopic``)."""
        return self.processing_log_topic_name or f"{self.service_id}ksql_processing_log"

    def listed_properties(self) -> dict[str, str]:
        """What SHOW PROPERTIES lists, as ksqlDB's ``KsqlConfig.getAllConfigPropsWithSecretsObfuscated``
        gives it: every ``ksql.*`` property the server honours with its value, defaults included
        (as text, booleans in lower case), and the ``ksql.streams.*`` ones, given or defaulted.
        Security properties are not listed (ksqlDB shows them obfuscated; here they stay out)."""
        streams = {"auto.offset.reset": "latest", "commit.interval.ms": "2000", "state.dir": self.state_dir,
                   "bootstrap.servers": self.bootstrap_servers, **dict(self.streams)}
        flag = lambda b: "true" if b else "false"               # noqa: E731
        listed = {f"ksql.streams.{k}": v for k, v in streams.items()}
        listed.update({
            "ksql.service.id": self.service_id,
            "ksql.schema.registry.url": self.schema_registry_url or "",
            "ksql.query.retry.backoff.initial.ms": str(self.retry_backoff_initial_ms),
            "ksql.query.retry.backoff.max.ms": str(self.retry_backoff_max_ms),
            "ksql.timestamp.throw.on.invalid": flag(self.timestamp_throw_on_invalid),
            "ksql.fail.on.deserialization.error": flag(self.fail_on_deserialization_error),
            "ksql.logging.processing.rows.include": flag(self.processing_log_rows_include),
            "ksql.logging.processing.topic.auto.create": flag(self.processing_log_topic_auto_create),
            "ksql.logging.processing.topic.name": self.processing_log_topic_name,
            "ksql.logging.processing.topic.partitions": str(self.processing_log_topic_partitions),
            "ksql.logging.processing.topic.replication.factor": str(self.processing_log_topic_replication_factor),
            "ksql.logging.processing.stream.auto.create": flag(self.processing_log_stream_auto_create),
            "ksql.logging.processing.stream.name": self.processing_log_stream_name,
            "ksql.insert.into.values.enabled": flag(self.insert_values_enabled),
        })
        return listed

    def streams_property(self, name: str, default: str) -> str:
        return dict(self.streams).get(name, default)

    @property
    def listener(self) -> tuple[str, int]:
        """(host, port) of the first listener."""
        url = urlparse(self.listeners[0])
        if url.scheme != "http" or url.port is None:
            raise ConfigError(f"listeners: {self.listeners[0]!r} is not http://host:port")
        return url.hostname or "0.0.0.0", url.port

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "KsqlConfig":
        p = {k.strip(): v.strip() for k, v in props.items()}
        listeners = tuple(x.strip() for x in p.get("listeners", "http://0.0.0.0:8088").split(",") if x.strip())
        streams = tuple(sorted((k[len("ksql.streams."):], v) for k, v in p.items() if k.startswith("ksql.streams.")))
        reset = dict(streams).get("auto.offset.reset", "latest")
        if reset not in ("earliest", "latest"):
            raise ConfigError(f"ksql.streams.auto.offset.reset: {reset!r} is not earliest or latest")
        interval = dict(streams).get("commit.interval.ms", "2000")
        if not interval.isdigit() or int(interval) <= 0:
            raise ConfigError(f"ksql.streams.commit.interval.ms: {interval!r} is not a positive number")
        backoff = {}
        for name, default in (("ksql.query.retry.backoff.initial.ms", "15000"),
                              ("ksql.query.retry.backoff.max.ms", "900000")):
            text = p.get(name, default)
            if not text.isdigit():
                raise ConfigError(f"{name}: {text!r} is not a number of milliseconds")
            backoff[name] = int(text)
        idle = p.get("ksql.idle.connection.timeout.seconds", "600").strip()
        if not idle.isdigit() or int(idle) == 0:
            raise ConfigError(f"ksql.idle.connection.timeout.seconds: {idle!r} is not a positive number of seconds")
        flags = {}
        for name, default in (("ksql.timestamp.throw.on.invalid", "false"),
                              ("ksql.fail.on.deserialization.error", "false"),
                              ("ksql.logging.processing.rows.include", "false"),
                              ("ksql.insert.into.values.enabled", "true"),
                              ("ksql.logging.processing.topic.auto.create", "false"),
                              ("ksql.logging.processing.stream.auto.create", "false")):
            flag = p.get(name, default).lower()
            if flag not in ("true", "false"):
                raise ConfigError(f"{name}: {flag!r} is not true or false")
            flags[name] = flag == "true"
        sizes = {}
        for name in ("ksql.logging.processing.topic.partitions", "ksql.logging.processing.topic.replication.factor"):
            text = p.get(name, "1")
            if not text.isdigit() or int(text) == 0:
                raise ConfigError(f"{name}: {text!r} is not a positive number")
            sizes[name] = int(text)
        stream_name = p.get("ksql.logging.processing.stream.name", "KSQL_PROCESSING_LOG")
        if not stream_name:
            raise ConfigError("ksql.logging.processing.stream.name: the stream needs a name")
        security = tuple(sorted((k, v) for k, v in p.items() if is_security_key(k)))
        try:
            ClientSecurity.from_properties(dict(security))        # a bad value stops the server now
        except ClientError as exc:
            raise ConfigError(str(exc)) from None
        config = cls(
            bootstrap_servers=p.get("bootstrap.servers") or p.get("ksql.streams.bootstrap.servers") or "127.0.0.1:9092",
            service_id=p.get("ksql.service.id", "default_"), listeners=listeners,
            schema_registry_url=(p.get("ksql.schema.registry.url") or None),
            state_dir=p.get("ksql.streams.state.dir") or cls().state_dir,
            spark_master=p.get("spark.master", "local[2]"),
            spark_conf=tuple(sorted((k, v) for k, v in p.items() if k.startswith("spark.") and k != "spark.master")),
            streams=streams, security_properties=security,
            retry_backoff_initial_ms=backoff["ksql.query.retry.backoff.initial.ms"],
            retry_backoff_max_ms=backoff["ksql.query.retry.backoff.max.ms"],
            timestamp_throw_on_invalid=flags["ksql.timestamp.throw.on.invalid"],
            fail_on_deserialization_error=flags["ksql.fail.on.deserialization.error"],
            processing_log_rows_include=flags["ksql.logging.processing.rows.include"],
            insert_values_enabled=flags["ksql.insert.into.values.enabled"],
            processing_log_topic_auto_create=flags["ksql.logging.processing.topic.auto.create"],
            processing_log_topic_name=p.get("ksql.logging.processing.topic.name", ""),
            processing_log_topic_partitions=sizes["ksql.logging.processing.topic.partitions"],
            processing_log_topic_replication_factor=sizes["ksql.logging.processing.topic.replication.factor"],
            processing_log_stream_auto_create=flags["ksql.logging.processing.stream.auto.create"],
            processing_log_stream_name=stream_name,
            idle_connection_timeout_s=int(idle))
        config.listener                                   # checks the first listener now
        return config


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            out[line[:sep].strip()] = line[sep + 1:].strip()
    return out
