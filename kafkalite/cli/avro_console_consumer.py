"""kafkalite-avro-console-consumer: registry-framed Avro in, JSON lines out (kafka-avro-console-consumer).

Each value (and with ``print.key=true`` each framed key) is decoded with the schema its id names,
fetched once per id from ``--property schema.registry.url=<url>``, and printed in Avro's JSON
encoding. ``print.schema.ids=true`` appends the ids after ``schema.id.separator`` (a tab by
default). A value that is not registry-framed or whose id the registry does not know is an error
(or skipped with ``--skip-message-on-error``). Every other option is the console consumer's.
"""
from __future__ import annotations

import sys
from typing import Any

from kafkalite.client import ConsumerRecord
from kafkalite.registry.client import RegisteredSchema, RegistryClient, RegistryClientError
from kafkalite.registry.serde import SerdeError, decode, parse_avro, to_json

from .common import ToolError, client_properties, properties, run
from .console_consumer import build_parser as consumer_parser, consume


def build_parser():
    p = consumer_parser()
    p.prog = "kafkalite-avro-console-consumer"
    p.description = "Consume registry-framed Avro records and print them as JSON."
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    props = properties(a.property, "--property")
    security, cprops = client_properties(a.consumer_config, a.consumer_property, "consumer")
    if "schema.registry.url" not in props:
        raise ToolError("--property schema.registry.url=<url> is required")
    try:
        registry = RegistryClient(props["schema.registry.url"])
    except RegistryClientError as exc:
        raise ToolError(str(exc)) from None
    print_ids = props.get("print.schema.ids", "false").lower() == "true"
    id_sep = props.get("schema.id.separator", "\t")
    print_key = props.get("print.key", "false").lower() == "true"
    parsed: dict[int, tuple[RegisteredSchema, Any]] = {}

    def lookup(schema_id: int) -> tuple[RegisteredSchema, Any]:
        if schema_id not in parsed:
            try:
                reg = registry.by_id(schema_id)
            except RegistryClientError as exc:
                raise SerdeError(f"schema id {schema_id}: {exc}") from None
            if reg.schema_type != "AVRO":
                raise SerdeError(f"schema id {schema_id} is a {reg.schema_type} schema, not Avro")
            parsed[schema_id] = (reg, parse_avro(reg.schema, reg.dependencies))
        return parsed[schema_id]

    def text(data: bytes | None) -> tuple[bytes | None, int | None]:
        if data is None:
            return None, None
        schema_id, schema, datum = decode(data, lookup)
        return to_json(schema, datum).encode(), schema_id

    def render(r: ConsumerRecord) -> tuple[bytes | None, bytes | None] | None:
        try:
            value, value_id = text(r.value)
            key, key_id = r.key, None
            if print_key and r.key is not None and r.key[:1] == b"\x00" and len(r.key) >= 5:
                key, key_id = text(r.key)
        except SerdeError as exc:
            message = f"Error deserializing Avro message at {r.topic}-{r.partition} offset {r.offset}: {exc}"
            if a.skip_message_on_error:
                sys.stderr.write(message + "\n")
                return None
            raise ToolError(message) from None
        if print_ids:
            if print_key:        # the key column always carries its id column (empty: not framed)
                key = (b"null" if key is None else key) + f"{id_sep}{key_id if key_id is not None else ''}".encode()
            if value is not None:
                value += f"{id_sep}{value_id}".encode()
        return key, value

    return consume(a, props, cprops, render, client_id="avro-console-consumer", security=security)


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
