"""kafkalite-console-producer: one record per stdin line, like kafka-console-producer.sh."""
from __future__ import annotations

import sys
from typing import Any

from kafkalite.client import ClientError, Producer

from .common import ToolError, client_config_arg, client_properties, parser, properties, run

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def build_parser():
    p = parser("kafkalite-console-producer", "Read data from standard input and publish it to a topic.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", metavar="PROP=VALUE",
                   help="parse.key=true, key.separator=<sep> (default tab), ignore.error=true")
    p.add_argument("--producer-property", action="append", metavar="PROP=VALUE",
                   help="producer settings with Kafka's names, e.g. acks=all, linger.ms=5, security.protocol=SASL_SSL")
    client_config_arg(p, "producer")
    p.add_argument("--compression-codec", nargs="?", const="gzip", choices=CODECS)
    p.add_argument("--request-required-acks", default=None)
    p.add_argument("--sync", action="store_true", help="send each record synchronously")
    p.add_argument("--batch-size", type=int, default=200, help="records per batch sent in async mode")
    p.add_argument("--timeout", type=int, default=1000, help="linger in ms in async mode")
    p.add_argument("--max-block-ms", type=int, default=60000)
    return p


_PRODUCER_KEYS = {"acks": "acks", "linger.ms": "linger_ms", "batch.size": "batch_size",
                  "compression.type": "compression_type", "enable.idempotence": "enable_idempotence",
                  "max.request.size": "max_request_size", "request.timeout.ms": "request_timeout_ms",
                  "delivery.timeout.ms": "delivery_timeout_ms", "retry.backoff.ms": "retry_backoff_ms",
                  "client.id": "client_id", "buffer.memory": "buffer_memory"}


def producer_options(props: dict[str, str]) -> dict:
    """Java producer property names to Producer keyword arguments (unknown names are an error)."""
    out: dict = {}
    for k, v in props.items():
        if k == "bootstrap.servers":
            continue
        name = _PRODUCER_KEYS.get(k)
        if name is None:
            raise ToolError(f"unsupported producer property {k!r} (supported: {', '.join(sorted(_PRODUCER_KEYS))})")
        if name in ("linger_ms", "batch_size", "max_request_size", "request_timeout_ms", "delivery_timeout_ms",
                    "retry_backoff_ms", "buffer_memory"):
            try:
                out[name] = int(v)
            except ValueError:
                raise ToolError(f"invalid value {v!r} for producer property {k}") from None
        elif name == "enable_idempotence":
            out[name] = v.lower() == "true"
        else:
            out[name] = v
    return out


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    props = properties(a.property, "--property")
    parse_key = props.get("parse.key", "false").lower() == "true"
    sep = props.get("key.separator", "\t")
    ignore_error = props.get("ignore.error", "false").lower() == "true"
    opts: dict[str, Any] = {"acks": "1", "linger_ms": 0 if a.sync else a.timeout, "compression_type": a.compression_codec or "none"}
    if a.request_required_acks is not None:
        opts["acks"] = a.request_required_acks
    security, pprops = client_properties(a.producer_config, a.producer_property, "producer")
    opts.update(producer_options(pprops))
    producer = Producer(a.bootstrap_server, client_id="console-producer", security=security, **opts)
    failures: list[BaseException] = []

    def on_done(fut) -> None:
        exc = fut.exception()
        if exc is not None:
            failures.append(exc)
            sys.stderr.write(f"Error when sending message to topic {a.topic}: {exc}\n")
    try:
        for lineno, raw in enumerate(sys.stdin.buffer, 1):
            line = raw.rstrip(b"\n").rstrip(b"\r")
            key = None
            if parse_key:
                k, found, v = line.partition(sep.encode())
                if not found:
                    if not ignore_error:
                        raise ToolError(f"No key separator found on line number {lineno}: '{line.decode(errors='replace')}'")
                    k, v = None, line
                key, line = k, v
            fut = producer.send(a.topic, line, key, callback=on_done)
            if a.sync:
                try:
                    fut.result()
                except ClientError:
                    pass
            if failures and not ignore_error:
                break
    finally:
        producer.close()
    return 1 if failures else 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
