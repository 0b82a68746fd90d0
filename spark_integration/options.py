"""The source's options, parsed and validated once, with Spark's Kafka-source names and wording.

Spark hands a Python data source every option as a ``str`` under a lower-cased key (pyspark
reference P5), so :func:`parse_options` takes any mapping, lower-cases it and returns one frozen,
picklable :class:`SourceOptions`. Validation errors are ``ValueError`` with the sentence Spark's
``KafkaSourceProvider`` uses (Spark raises ``IllegalArgumentException``); raised from
``DataSource.schema()`` they surface at ``load()`` as an ``AnalysisException``, as with Spark's
own source. Nothing here talks to a broker: offsets given as ``earliest``/``latest``/JSON stay
symbolic until :mod:`spark_integration.planning` resolves them against ListOffsets answers.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from kafkalite.client.errors import ClientError
from kafkalite.client.security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

#: Offsets JSON sentinels, as in Spark's Kafka source (and Kafka's ListOffsets).
EARLIEST = -2
LATEST = -1

STRATEGIES = ("assign", "subscribe", "subscribepattern")
_STRATEGY_NAMES = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}

#: kafka.* options Spark refuses because the source manages them itself.
_REJECTED = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
                               "'startingOffsets' to 'earliest' or 'latest' to specify where to start.",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are always read as "
                              "byte arrays. Use DataFrame operations to explicitly deserialize the keys.",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are always read "
                                "as byte arrays. Use DataFrame operations to explicitly deserialize the values.",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: the source never commits "
                                "on its own; use the 'groupId' option and spark_integration.commit_ranges.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported as the source reads "
                                 "raw record batches.",
}


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends, before it is resolved against the brokers.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``per_partition`` holds offsets, -2/-1
    allowed), ``timestamps`` (``per_partition`` holds ms) or ``timestamp`` (``timestamp`` for all
    partitions).
    """

    kind: str
    per_partition: tuple[tuple[str, int, int], ...] = ()
    timestamp: int | None = None

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): v for t, p, v in self.per_partition}


@dataclass(frozen=True)
class AvroSubject:
    """``keyAvroSubject``/``valueAvroSubject`` and their version: the reader schema of a column
    decoded from registry-framed Avro (resolved against the registry at load)."""

    field: str                                   # "key" or "value"
    subject: str
    version: str = "latest"                      # "latest" or a version number


@dataclass(frozen=True)
class SourceOptions:
    """Everything the planner and the readers need, as plain picklable values."""

    bootstrap_servers: str
    strategy: str                                # "assign", "subscribe" or "subscribePattern"
    assign: tuple[tuple[str, int], ...] = ()
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    starting_timestamp_strategy: str = "error"   # startingOffsetsByTimestampStrategy: error | latest
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000   # maxTriggerDelay, Spark's default 15m
    group_id: str | None = None
    #: the group a streaming query commits each processed batch to (groupId, else kafka.group.id)
    commit_group_id: str | None = None
    isolation_level: int = 0                     # 0 read_uncommitted (Spark's default); 1 read_committed: ends at the LSO
    max_partition_fetch_bytes: int = 4 << 20
    request_timeout_ms: int = 30000
    client_id: str = "kafkalite-spark"
    fetch_retries: int = 3
    retry_interval_ms: int = 10
    poll_timeout_ms: int = 120000
    client_config: tuple[tuple[str, str], ...] = field(default=())   # every kafka.* option, prefix stripped
    security: ClientSecurity = PLAINTEXT         # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*
    schema_registry_url: str | None = None
    key_avro: AvroSubject | None = None
    value_avro: AvroSubject | None = None
    #: ``mode``, Spark's parse mode for the Avro columns: FAILFAST (a record that cannot be decoded
    #: fails the task) or DROPMALFORMED (it is dropped and logged)
    avro_mode: str = "FAILFAST"
    #: ``malformedRecordHandler`` (``package.module:function``) and ``malformedRecordHandlerArgs``:
    #: a function each record DROPMALFORMED drops is given to, on the worker, with the text argument
    malformed_handler: tuple[str, str] | None = None

    @property
    def avro_subjects(self) -> tuple[AvroSubject, ...]:
        return tuple(a for a in (self.key_avro, self.value_avro) if a is not None)

    def topic_partitions(self) -> list[tuple[str, int]]:
        return list(self.assign)


def parse_options(options: Mapping[str, Any], *, streaming: bool | None = False) -> SourceOptions:
    """Validate ``options`` as Spark's Kafka source does for a batch or a streaming query.

    ``streaming=None`` checks only what both share (``DataSource.schema()`` cannot tell which).
    """
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    for key, message in _REJECTED.items():
        if key in opts:
            raise ValueError(message)

    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")

    given = [s for s in STRATEGIES if s in opts]
    names = ", ".join(_STRATEGY_NAMES[s] for s in STRATEGIES)
    if not given:
        raise ValueError(f"One of the following options must be specified for Kafka source: {names}. "
                         "See the docs for more details.")
    if len(given) > 1:
        raise ValueError(f"Only one of the following options can be specified for Kafka source: {names}. "
                         "See the docs for more details.")
    strategy = _STRATEGY_NAMES[given[0]]
    assign: tuple[tuple[str, int], ...] = ()
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    if strategy == "assign":
        assign = _parse_assign(opts["assign"])
    elif strategy == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is "
                             f"'{opts['subscribe']}'")
    else:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise ValueError(f"Pattern to subscribe is empty as specified value for option 'subscribePattern' "
                             f"is '{opts['subscribepattern']}'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"Invalid regular expression for option 'subscribePattern' '{pattern}': {exc}") from None

    starting = _offset_spec(opts, "starting", default="latest" if streaming else "earliest")
    if streaming:
        for key in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if key in opts:
                raise ValueError(f"{_camel(key)} option not valid in streaming queries")
        ending = OffsetSpec("latest")
    else:
        # ending options only exist for batch, so they are checked in the shared mode too
        ending = _offset_spec(opts, "ending", default="latest")
        if streaming is False and (starting.kind == "latest" or (
                starting.kind == "offsets" and any(v == LATEST for _, _, v in starting.per_partition))):
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if ending.kind == "earliest" or (ending.kind == "offsets" and
                                         any(v == EARLIEST for _, _, v in ending.per_partition)):
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        if starting.kind == "offsets" and ending.kind == "offsets":
            s, e = starting.as_dict(), ending.as_dict()
            if set(s) != set(e):
                raise ValueError("startingOffsets and endingOffsets must name the same topic-partitions, "
                                 f"got {_tp_list(s)} and {_tp_list(e)}")
            for tp in sorted(s):
                if s[tp] >= 0 and e[tp] >= 0 and s[tp] > e[tp]:
                    raise ValueError(f"startingOffsets for {tp[0]}-{tp[1]} ({s[tp]}) is after its endingOffsets "
                                     f"({e[tp]})")
    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise ValueError(f"Invalid value '{ts_strategy}' for option 'startingOffsetsByTimestampStrategy', "
                         "must be 'error' or 'latest'")

    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()     # Spark's default
    if isolation not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"Invalid value '{isolation}' for option 'kafka.isolation.level', "
                         "must be 'read_committed' or 'read_uncommitted'")

    min_parts = _positive_int(opts, "minpartitions", "minPartitions")
    max_per_trigger = _positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if min_per_trigger is not None and max_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ValueError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                         f"maxOffsetsPerTrigger({max_per_trigger}).")
    max_delay_ms = duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
    if streaming is False:
        for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                          ("minoffsetspertrigger", "minOffsetsPerTrigger"), ("maxtriggerdelay", "maxTriggerDelay")):
            if key in opts:
                log.warning("%s option ignored in batch queries", name)
    group_id = opts.get("groupid", "").strip() or None
    if "groupid" in opts and group_id is None:
        raise ValueError("Option 'groupId' must not be empty")

    client_config = tuple(sorted((k[len("kafka."):], v) for k, v in opts.items() if k.startswith("kafka.")))
    security = security_from_options(opts)
    registry_url, key_avro, value_avro = _avro_options(opts)
    avro_mode = opts.get("mode", "FAILFAST").strip().upper()
    if avro_mode not in ("FAILFAST", "DROPMALFORMED"):
        raise ValueError(f"Invalid value '{opts['mode']}' for option 'mode', must be FAILFAST or DROPMALFORMED")
    handler = opts.get("malformedrecordhandler", "").strip()
    if handler:
        from spark_integration.avro import malformed_handler
        malformed_handler(handler)                 # a name that cannot be imported: the option's error now
    elif "malformedrecordhandlerargs" in opts:
        raise ValueError("Option 'malformedRecordHandlerArgs' needs option 'malformedRecordHandler'")
    return SourceOptions(
        bootstrap_servers=bootstrap, strategy=strategy, assign=assign, subscribe=subscribe, pattern=pattern,
        starting=starting, ending=ending, starting_timestamp_strategy=ts_strategy,
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        min_partitions=min_parts, max_offsets_per_trigger=max_per_trigger, min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay_ms, group_id=group_id,
        commit_group_id=group_id or opts.get("kafka.group.id", "").strip() or None,
        isolation_level=1 if isolation == "read_committed" else 0,
        max_partition_fetch_bytes=_positive_int(opts, "kafka.max.partition.fetch.bytes",
                                                "kafka.max.partition.fetch.bytes") or 4 << 20,
        request_timeout_ms=_positive_int(opts, "kafka.request.timeout.ms", "kafka.request.timeout.ms") or 30000,
        client_id=opts.get("kafka.client.id", "kafkalite-spark") or "kafkalite-spark",
        fetch_retries=_non_negative_int(opts, "fetchoffset.numretries", "fetchOffset.numRetries", 3),
        retry_interval_ms=_non_negative_int(opts, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", 10),
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs") or 120000,
        client_config=client_config, security=security,
        schema_registry_url=registry_url, key_avro=key_avro, value_avro=value_avro, avro_mode=avro_mode,
        malformed_handler=(handler, opts.get("malformedrecordhandlerargs", "")) if handler else None,
    )


def security_from_options(options: Mapping[str, Any]) -> ClientSecurity:
    """The client's TLS/SASL from Spark-style ``kafka.``-prefixed options (``kafka.security.protocol``,
    ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` or ``kafka.sasl.username``/``kafka.sasl.password``,
    ``kafka.ssl.ca.location`` or ``kafka.ssl.truststore.location``...); a bad value is ValueError."""
    props = {str(k).lower()[len("kafka."):]: ("" if v is None else str(v)) for k, v in options.items()
             if str(k).lower().startswith("kafka.")}
    try:
        return ClientSecurity.from_properties(props)
    except ClientError as exc:
        raise ValueError(f"Invalid Kafka security options: {exc}") from None


def _avro_options(opts: Mapping[str, str]) -> tuple[str | None, AvroSubject | None, AvroSubject | None]:
    """``schemaRegistryUrl`` with ``keyAvroSubject``/``valueAvroSubject`` (+ ``...AvroVersion``)."""
    url = opts.get("schemaregistryurl", "").strip().split(",")[0].strip().rstrip("/") or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise ValueError(f"Invalid value '{opts['schemaregistryurl']}' for option 'schemaRegistryUrl', "
                         "must be an http:// or https:// URL")
    found: dict[str, AvroSubject | None] = {}
    for side in ("key", "value"):
        subject = opts.get(f"{side}avrosubject", "").strip()
        version = opts.get(f"{side}avroversion", "latest").strip().lower() or "latest"
        if f"{side}avrosubject" in opts and not subject:
            raise ValueError(f"Option '{side}AvroSubject' must not be empty")
        if not subject:
            if f"{side}avroversion" in opts:
                raise ValueError(f"Option '{side}AvroVersion' needs '{side}AvroSubject'")
            found[side] = None
            continue
        if version != "latest" and not (version.isdigit() and int(version) > 0):
            raise ValueError(f"Invalid value '{opts[f'{side}avroversion']}' for option '{side}AvroVersion', "
                             "must be 'latest' or a positive version number")
        if url is None:
            raise ValueError(f"Option 'schemaRegistryUrl' must be specified with '{side}AvroSubject'")
        found[side] = AvroSubject(side, subject, version)
    if url is not None and found["key"] is None and found["value"] is None:
        raise ValueError("Option 'schemaRegistryUrl' needs 'keyAvroSubject' and/or 'valueAvroSubject' "
                         "(the subjects whose schemas the columns are decoded to)")
    return url, found["key"], found["value"]


_DURATION_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}


def duration_ms(text: str, name: str) -> int:
    """Spark's time strings (``JavaUtils.timeStringAsMs``): a number with us, ms, s, m/min, h or d
    (a bare number is milliseconds)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if m is None or m.group(2) not in ("", *_DURATION_UNITS):
        raise ValueError(f"Invalid value '{text}' for option '{name}': expected a duration such as 15m, 30s, 500ms")
    return int(int(m.group(1)) * _DURATION_UNITS.get(m.group(2), 1))


def _camel(key: str) -> str:
    return {"endingoffsets": "endingOffsets", "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
            "endingtimestamp": "endingTimestamp"}[key]


def _tp_list(d: Mapping[tuple[str, int], int]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(d)) + "]"


def _parse_assign(text: str) -> tuple[tuple[str, int], ...]:
    bad = (f"No topicpartitions to assign as specified value for option 'assign' is '{text}'. "
           'Expected JSON like {"topicA":[0,1],"topicB":[2,4]}')
    if not text.strip().startswith("{"):
        raise ValueError(bad)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(bad) from None
    out: list[tuple[str, int]] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                                                  for p in parts):
            raise ValueError(bad)
        out.extend((topic, p) for p in parts)
    if not out:
        raise ValueError(bad)
    return tuple(sorted(set(out)))


def _offset_spec(opts: Mapping[str, str], side: str, default: str) -> OffsetSpec:
    """Spark's precedence: <side>Timestamp > <side>OffsetsByTimestamp > <side>Offsets."""
    key_ts, key_by_ts, key_offsets = f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if key_ts in opts:
        try:
            return OffsetSpec("timestamp", timestamp=int(opts[key_ts].strip()))
        except ValueError:
            raise ValueError(f"Expected a single long value for option '{side}Timestamp', "
                             f"got '{opts[key_ts]}'") from None
    if key_by_ts in opts:
        return OffsetSpec("timestamps", per_partition=_partition_json(opts[key_by_ts], f"{side}OffsetsByTimestamp",
                                                                     allow_sentinels=False))
    text = opts.get(key_offsets, default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", per_partition=_partition_json(text, f"{side}Offsets", allow_sentinels=True))


def _partition_json(text: str, option: str, *, allow_sentinels: bool) -> tuple[tuple[str, int, int], ...]:
    # Spark's JsonUtils examples: offsets (with the -1/-2 sentinels) or timestamps, as the option takes
    example = ('{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}' if allow_sentinels else
               '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}')
    bad = f"Expected e.g. {example} for option '{option}', got '{text}'"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(bad) from None
    if not isinstance(data, dict) or not data:
        raise ValueError(bad)
    out: list[tuple[str, int, int]] = []
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(bad)
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise ValueError(bad) from None
            if not isinstance(v, int) or isinstance(v, bool) or partition < 0:
                raise ValueError(bad)
            if v < 0 and not (allow_sentinels and v in (EARLIEST, LATEST)):
                raise ValueError(f"Invalid value {v} for {topic}-{partition} in option '{option}': "
                                 "use an offset >= 0, -2 (earliest) or -1 (latest)"
                                 if allow_sentinels else
                                 f"Invalid timestamp {v} for {topic}-{partition} in option '{option}'")
            out.append((topic, partition, v))
    return tuple(sorted(out))


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    if key not in opts:
        return default
    value = opts[key].strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"Invalid value '{opts[key]}' for option '{name}', must be true or false")
    return value == "true"


def _positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    if key not in opts:
        return None
    try:
        value = int(opts[key].strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"Invalid value '{opts[key]}' for option '{name}', must be a positive integer")
    return value


def _non_negative_int(opts: Mapping[str, str], key: str, name: str, default: int) -> int:
    if key not in opts:
        return default
    try:
        value = int(opts[key].strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"Invalid value '{opts[key]}' for option '{name}', must be a non-negative integer")
    return value
