"""kafkalite-avro-console-producer: JSON lines in, registry-framed Avro out (kafka-avro-console-producer).

Each stdin line is one record in Avro's JSON encoding (unions as ``{"string": "x"}``), checked
against the schema and written as Confluent's wire format (magic 0, schema id, Avro binary).
The schema is ``--property value.schema=<json>`` (or ``value.schema.file`` / ``value.schema.id``),
registered under ``<topic>-value`` unless ``auto.register=false`` (then looked up, or with
``use.latest.version=true`` the subject's latest is used). With ``parse.key=true`` the key before
``key.separator`` is Avro too when ``key.schema`` (or ``.file``/``.id``) is given, else raw bytes.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kafkalite.client import ClientError, Producer
from kafkalite.registry.client import RegistryClient, RegistryClientError
from kafkalite.registry.serde import SerdeError, encode, from_json, parse_avro

from .common import ToolError, client_config_arg, client_properties, parser, properties, run
from .console_producer import producer_options


def build_parser():
    p = parser("kafkalite-avro-console-producer",
               "Read JSON records from standard input and publish them as registry-framed Avro.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", metavar="PROP=VALUE",
                   help="schema.registry.url (required), value.schema / value.schema.file / value.schema.id, "
                        "key.schema / key.schema.file / key.schema.id, parse.key, key.separator, auto.register, "
                        "use.latest.version, ignore.error")
    p.add_argument("--producer-property", action="append", metavar="PROP=VALUE")
    client_config_arg(p, "producer")
    p.add_argument("--sync", action="store_true", help="send each record synchronously")
    return p


def _schema_for(registry: RegistryClient, props: dict[str, str], which: str, subject: str) -> tuple[int, Any] | None:
    """(schema id, parsed schema) for ``which`` ("key"/"value") from the properties, None if not given."""
    text, given_id = props.get(f"{which}.schema"), props.get(f"{which}.schema.id")
    if f"{which}.schema.file" in props:
        try:
            text = Path(props[f"{which}.schema.file"]).read_text()
        except OSError as exc:
            raise ToolError(f"cannot read {which}.schema.file: {exc.strerror}") from None
    try:
        if given_id is not None:
            try:
                reg = registry.by_id(int(given_id))
            except ValueError:
                raise ToolError(f"{which}.schema.id={given_id!r} is not an integer") from None
            return reg.schema_id, parse_avro(reg.schema, reg.dependencies)
        if text is None:
            if props.get("use.latest.version", "false").lower() == "true":
                reg = registry.latest(subject)
                return reg.schema_id, parse_avro(reg.schema, reg.dependencies)
            return None
        parsed = parse_avro(text)
        if props.get("auto.register", "true").lower() == "true":
            return registry.register(subject, text), parsed
        if props.get("use.latest.version", "false").lower() == "true":
            reg = registry.latest(subject)
            return reg.schema_id, parse_avro(reg.schema, reg.dependencies)
        return registry.lookup(subject, text), parsed
    except SerdeError as exc:
        raise ToolError(f"{which}.schema: {exc}") from None
    except RegistryClientError as exc:
        code = f" (error code {exc.error_code})" if exc.error_code > 0 else ""
        raise ToolError(f"{which} schema for subject {subject}: {exc}{code}") from None


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    props = properties(a.property, "--property")
    if "schema.registry.url" not in props:
        raise ToolError("--property schema.registry.url=<url> is required")
    try:
        registry = RegistryClient(props["schema.registry.url"])
    except RegistryClientError as exc:
        raise ToolError(str(exc)) from None
    value_schema = _schema_for(registry, props, "value", f"{a.topic}-value")
    if value_schema is None:
        raise ToolError("a value schema is required: --property value.schema=<json> "
                        "(or value.schema.file, value.schema.id, use.latest.version=true)")
    parse_key = props.get("parse.key", "false").lower() == "true"
    key_schema = _schema_for(registry, props, "key", f"{a.topic}-key") if parse_key else None
    sep = props.get("key.separator", "\t")
    ignore_error = props.get("ignore.error", "false").lower() == "true"
    opts: dict[str, Any] = {"acks": "1", "linger_ms": 0}
    security, pprops = client_properties(a.producer_config, a.producer_property, "producer")
    opts.update(producer_options(pprops))
    producer = Producer(a.bootstrap_server, client_id="avro-console-producer", security=security, **opts)
    failures: list[BaseException] = []

    def on_done(fut) -> None:
        exc = fut.exception()
        if exc is not None:
            failures.append(exc)
            sys.stderr.write(f"Error when sending message to topic {a.topic}: {exc}\n")
    try:
        for lineno, raw in enumerate(sys.stdin, 1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            key: bytes | None = None
            try:
                if parse_key:
                    k, found, line = line.partition(sep)
                    if not found:
                        raise ToolError(f"No key separator found on line number {lineno}: '{k}'")
                    key = encode(key_schema[0], key_schema[1], from_json(key_schema[1], k)) if key_schema \
                        else k.encode()
                value = encode(value_schema[0], value_schema[1], from_json(value_schema[1], line))
            except (SerdeError, ToolError) as exc:
                if ignore_error:
                    sys.stderr.write(f"Error on line {lineno}: {exc}\n")
                    continue
                raise ToolError(f"Error serializing Avro message on line {lineno}: {exc}") from None
            fut = producer.send(a.topic, value, key, callback=on_done)
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
