"""kafkalite-configs: describe and alter topic (and broker) configs, like kafka-configs.sh.

Changes go through IncrementalAlterConfigs (key 44; AlterConfigs, key 33, when a broker lacks
it): the broker validates them, writes ``/config/topics/<t>`` and a ``/config/changes``
notification, and every broker applies the new values live.
"""
from __future__ import annotations

from kafkalite.client import Admin, ClientError
from kafkalite.client.admin import BROKER, DELETE, SET, TOPIC
from kafkalite.errors import ErrorCode

from .common import ToolError, bootstrap_arg, parser, run

ENTITY_TYPES = {"topics": TOPIC, "brokers": BROKER}


def build_parser():
    p = parser("kafkalite-configs", "Add, remove or describe configs of topics and brokers.")
    bootstrap_arg(p)
    p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), required=True)
    p.add_argument("--entity-name")
    p.add_argument("--entity-default", action="store_true")
    p.add_argument("--topic", help="shorthand for --entity-type topics --entity-name <topic>")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true")
    actions.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--add-config", help="k1=v1,k2=[v1,v2,v2],k3=v3")
    p.add_argument("--delete-config", help="k1,k2")
    return p


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's syntax: comma-separated k=v; square brackets group a value containing commas."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise ToolError(f"Invalid entity config: all configs to be added must be in the format \"key=val\" "
                            f"(got {text[i:]!r})")
        key = text[i:eq].strip()
        j = eq + 1
        if j < n and text[j] == "[":
            end = text.find("]", j)
            if end < 0:
                raise ToolError(f"unclosed '[' in --add-config {text!r}")
            value, i = text[j + 1:end], end + 1
            if i < n and text[i] == ",":
                i += 1
        else:
            end = text.find(",", j)
            end = n if end < 0 else end
            value, i = text[j:end], end + 1
        if not key:
            raise ToolError(f"Invalid entity config in --add-config {text!r}")
        out[key] = value.strip()
    return out


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    if a.topic:
        a.entity_type, a.entity_name = "topics", a.topic
    rtype = ENTITY_TYPES[a.entity_type]
    if a.entity_default:
        if rtype != BROKER:
            raise ToolError("--entity-default is only valid with --entity-type brokers")
        name = ""
    elif a.entity_name is None:
        raise ToolError("an entity name must be specified with --entity-name (or --entity-default for brokers)")
    else:
        name = a.entity_name
        if rtype == BROKER and not name.isdigit():
            raise ToolError(f"The entity name for brokers must be a valid integer broker id, found: {name}")
    singular = a.entity_type[:-1]
    with Admin(a.bootstrap_server) as admin:
        if rtype == TOPIC and name not in admin.client.metadata([name]).topics:
            raise ToolError(f"Topic '{name}' does not exist as expected")
        if a.describe:
            configs = admin.describe_configs(rtype, name or str(min(admin.client.metadata([]).brokers)))
            if a.all:
                title = f"All configs for {singular} {name} are:"
                entries = list(configs.values())
            else:
                wanted = {TOPIC: {"DYNAMIC_TOPIC_CONFIG"},
                          BROKER: {"DYNAMIC_DEFAULT_BROKER_CONFIG"} if a.entity_default else {"DYNAMIC_BROKER_CONFIG"}}
                entries = [e for e in configs.values() if e.source in wanted[rtype]]
                title = ("Default configs for brokers in the cluster are:" if a.entity_default
                         else f"Dynamic configs for {singular} {name} are:")
            print(title)
            for e in sorted(entries, key=lambda e: e.name):
                value = "null" if e.sensitive else e.value
                synonyms = ", ".join(f"{src}:{n}={v}" for n, v, src in e.synonyms)
                print(f"  {e.name}={value} sensitive={str(e.sensitive).lower()} synonyms={{{synonyms}}}")
            return 0
        adds = parse_add_config(a.add_config) if a.add_config else {}
        deletes = [k.strip() for k in (a.delete_config or "").split(",") if k.strip()]
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config and/or --delete-config")
        overlap = set(adds) & set(deletes)
        if overlap:
            raise ToolError(f"Invalid entity config: these configs are both added and deleted: {sorted(overlap)}")
        ops = [(k, SET, v) for k, v in adds.items()] + [(k, DELETE, None) for k in deletes]
        try:
            admin.incremental_alter_configs(rtype, name, ops)
        except ClientError as exc:
            if exc.code != ErrorCode.UNSUPPORTED_VERSION:
                raise
            current = {k: e.value for k, e in admin.describe_configs(rtype, name).items()
                       if e.source == "DYNAMIC_TOPIC_CONFIG"}
            current.update(adds)
            for k in deletes:
                current.pop(k, None)
            admin.alter_configs(rtype, name, current)
        target = "default config for brokers in the cluster" if a.entity_default else f"config for {singular} {name}"
        print(f"Completed updating {target}.")
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
