"""kafkalite-console-consumer: print records to stdout, like kafka-console-consumer.sh.

Output per record follows Kafka's DefaultMessageFormatter: optional ``CreateTime:<ts>``,
``Partition:<p>``, ``Offset:<o>``, the key, each followed by ``key.separator`` (tab by
default), then the value and ``line.separator``. "Processed a total of N messages" goes to stderr.
"""
from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Callable

from kafkalite.client import Consumer, ConsumerRecord, TopicPartition
from kafkalite.client.security import ClientSecurity

from .common import ToolError, client_config_arg, client_properties, parser, properties, run


def build_parser():
    p = parser("kafkalite-console-consumer", "Consume records from a topic and print them to standard output.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", help="consumer group id (default: a random console-consumer-NNNNN)")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default="latest", help="earliest, latest or an offset (needs --partition)")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    p.add_argument("--property", action="append", metavar="PROP=VALUE",
                   help="print.key, print.timestamp, print.partition, print.offset, print.headers, print.value, "
                        "key.separator, line.separator, headers.separator, headers.key.value.separator, "
                        "null.literal")
    p.add_argument("--consumer-property", action="append", metavar="PROP=VALUE",
                   help="consumer settings with Kafka's names, e.g. group.id=g, security.protocol=SASL_SSL")
    client_config_arg(p, "consumer")
    p.add_argument("--isolation-level", choices=ISOLATION_LEVELS,
                   help="read_committed reads only below the last stable offset and skips aborted "
                        "transactions (default: the consumer property isolation.level, else read_uncommitted)")
    p.add_argument("--skip-message-on-error", action="store_true")
    return p


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def isolation_level(option: str | None, cprops: dict[str, str]) -> str:
    """``--isolation-level`` wins over ``--consumer-property isolation.level=...`` (Kafka's
    ConsoleConsumer merges the option over the properties the same way)."""
    level = option if option is not None else cprops.get("isolation.level", "read_uncommitted")
    if level not in ISOLATION_LEVELS:
        raise ToolError(f"Invalid value {level} for configuration isolation.level: String must be one of: "
                        + ", ".join(ISOLATION_LEVELS))
    return level


def _flag(props: dict[str, str], key: str, default: bool = False) -> bool:
    return props.get(key, str(default)).lower() == "true"


def _unescape(s: str) -> str:
    return s.encode().decode("unicode_escape")


#: Turns one record into the key and value bytes printed (None = skip the record).
Render = Callable[[ConsumerRecord], "tuple[bytes | None, bytes | None] | None"]


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    security, cprops = client_properties(a.consumer_config, a.consumer_property, "consumer")
    return consume(a, properties(a.property, "--property"), cprops, security=security)


def consume(a: argparse.Namespace, props: dict[str, str], cprops: dict[str, str], render: Render | None = None,
            client_id: str = "console-consumer", security: ClientSecurity | None = None) -> int:
    """The consumer loop shared by the console consumers; ``render`` formats key and value,
    ``security`` is the client's TLS/SASL (from the consumer properties)."""
    print_key, print_ts = _flag(props, "print.key"), _flag(props, "print.timestamp")
    print_part, print_off = _flag(props, "print.partition"), _flag(props, "print.offset")
    print_value, print_headers = _flag(props, "print.value", True), _flag(props, "print.headers")
    headers_sep = _unescape(props.get("headers.separator", ",")).encode()
    header_kv_sep = _unescape(props.get("headers.key.value.separator", ":")).encode()
    null = _unescape(props.get("null.literal", "null")).encode()
    sep = _unescape(props.get("key.separator", "\t")).encode()
    line_sep = _unescape(props.get("line.separator", "\n")).encode()
    if a.partition is None and a.offset != "latest":
        raise ToolError("The partition is required when offset is specified.")
    if a.partition is not None and a.group:
        raise ToolError("Options group and partition cannot be specified together.")
    if a.offset not in ("earliest", "latest"):
        try:
            offset = int(a.offset)
        except ValueError:
            raise ToolError(f"The provided offset value '{a.offset}' is incorrect. Valid values are 'earliest', "
                            "'latest', or a non-negative long.") from None
        if offset < 0:
            raise ToolError(f"The provided offset value '{a.offset}' is incorrect.")
    isolation = isolation_level(a.isolation_level, cprops)
    reset = "earliest" if a.from_beginning else cprops.get("auto.offset.reset", "latest")
    group = a.group or cprops.get("group.id")
    if group is None and a.partition is None:
        group = f"console-consumer-{uuid.uuid4().int % 100000}"
    consumer = Consumer(a.bootstrap_server, group_id=group, auto_offset_reset=reset,
                        isolation_level=isolation, client_id=client_id, security=security,
                        enable_auto_commit=cprops.get("enable.auto.commit", "true").lower() == "true")
    out = sys.stdout.buffer
    count = 0
    try:
        if a.partition is not None:
            consumer.client.partitions_for(a.topic)      # unknown topic: a clear error
            tp = TopicPartition(a.topic, a.partition)
            if a.partition not in consumer.client.partitions_for(a.topic):
                raise ToolError(f"Partition {a.partition} of topic {a.topic} does not exist")
            consumer.assign([tp])
            if a.offset == "earliest" or (a.from_beginning and a.offset == "latest"):
                consumer.seek_to_beginning([tp])
            elif a.offset == "latest":
                consumer.seek_to_end([tp])
            else:
                consumer.seek(tp, int(a.offset))
        else:
            consumer.client.partitions_for(a.topic)
            consumer.subscribe([a.topic])
        last = time.monotonic()
        while a.max_messages is None or count < a.max_messages:
            wait = 1000 if a.timeout_ms is None else max(1, min(1000, a.timeout_ms))
            records = consumer.poll(wait, max_records=None if a.max_messages is None else a.max_messages - count)
            if not records:
                if a.timeout_ms is not None and (time.monotonic() - last) * 1000 >= a.timeout_ms:
                    break
                continue
            last = time.monotonic()
            for r in records:
                key, value = r.key, r.value
                if render is not None:
                    rendered = render(r)
                    if rendered is None:
                        continue
                    key, value = rendered
                parts = []
                if print_ts:
                    parts.append(b"%s:%d" % (b"LogAppendTime" if r.timestamp_type else b"CreateTime", r.timestamp))
                if print_part:
                    parts.append(b"Partition:%d" % r.partition)
                if print_off:
                    parts.append(b"Offset:%d" % r.offset)
                if print_headers:
                    parts.append(headers_sep.join(k.encode() + header_kv_sep + (null if v is None else v)
                                                  for k, v in r.headers) if r.headers else b"NO_HEADERS")
                if print_key:
                    parts.append(null if key is None else key)
                line = sep.join(parts)
                if print_value:
                    line = line + sep + (null if value is None else value) if parts else (
                        null if value is None else value)
                elif parts:
                    line += sep
                out.write(line + line_sep)
                count += 1
            out.flush()
    finally:
        try:
            consumer.close()
        finally:
            sys.stderr.write(f"Processed a total of {count} messages\n")
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
