"""kafkalite-configs: describe and alter topic (and broker) configs, like kafka-configs.sh.

Changes go through IncrementalAlterConfigs (key 44; AlterConfigs, key 33, when a broker lacks
it): the broker validates them, writes ``/config/topics/<t>`` and a ``/config/changes``
notification, and every broker applies the new values live.

Users (``--entity-type users``) hold SCRAM credentials, as kafka-configs.sh manages them with
``--zookeeper`` in Kafka 2.x: ``--add-config 'SCRAM-SHA-512=[password=...]'`` (optionally
``iterations=N``, at least 4096) salts and hashes the password here, in the tool, and writes
only ``salt=...,stored_key=...,server_key=...,iterations=N`` to ``/config/users/<user>`` with a
``/config/changes`` notification; brokers read the credential at the next authentication.

Client quotas (``--entity-type clients|users``, and both for a user's client, as Kafka:
``--entity-type users --entity-name u --entity-type clients --entity-name c``; ``--entity-default``
instead of a name for the ``<default>`` entity) go through DescribeClientQuotas /
AlterClientQuotas (48/49) with Kafka's keys ``producer_byte_rate``, ``consumer_byte_rate`` and
``request_percentage``.
"""
from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkalite.client import Admin, ClientError
from kafkalite.client.admin import BROKER, DELETE, SET, TOPIC
from kafkalite.errors import ErrorCode
from kafkalite.security import scram
from kafkalite.coordination.client import secure_acls
from zk_schema import ConfigEntityChangeNotification, ConfigEntityZNode, sanitize

from .common import ToolError, bootstrap_arg, command_config, parser, run, zookeeper_login

ENTITY_TYPES = {"topics": TOPIC, "brokers": BROKER}
USERS = "users"
#: quota entity types of the tool -> those of the protocol
QUOTA_TYPES = {USERS: "user", "clients": "client-id"}


def build_parser():
    p = parser("kafkalite-configs", "Add, remove or describe configs of topics, brokers, clients and users.")
    bootstrap_arg(p, required=False)
    p.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                   help="ZooKeeper connect string (users' SCRAM credentials, as Kafka 2.x's ConfigCommand)")
    p.add_argument("--entity-type", choices=sorted({**ENTITY_TYPES, **QUOTA_TYPES}), required=True, action="append",
                   help="topics, brokers, clients or users (users and clients together: a user's client)")
    # names and defaults share one list so that their order pairs them with the entity types
    p.add_argument("--entity-name", dest="entity_names", action="append", default=[])
    p.add_argument("--entity-default", dest="entity_names", action="append_const", const=None)
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


def parse_scram_config(name: str, value: str) -> tuple[str, int]:
    """``password=...[,iterations=N]`` of a SCRAM-SHA-* entry -> (password, iterations)."""
    fields: dict[str, str] = {}
    for item in value.split(","):
        key, sep, v = item.partition("=")
        if not sep or key.strip() not in ("password", "iterations"):
            raise ToolError(f"Invalid credential property {item!r} for {name}: expected password=...[,iterations=N]")
        fields[key.strip()] = v
    if not fields.get("password"):
        raise ToolError(f"Invalid credential for {name}: password must be specified")
    try:
        iterations = int(fields.get("iterations", scram.DEFAULT_ITERATIONS))
    except ValueError:
        raise ToolError(f"Invalid iterations for {name}: {fields['iterations']!r}") from None
    low = scram.MECHANISMS[name][1]
    if not low <= iterations <= scram.MAX_ITERATIONS:
        raise ToolError(f"Invalid iterations for {name}: {iterations} (must be between {low} and {scram.MAX_ITERATIONS})")
    return fields["password"], iterations


def alter_user_zookeeper(zk: Any, user: str, adds: dict[str, str], deletes: list[str]) -> dict[str, str]:
    """Apply adds/deletes to ``/config/users/<user>`` through a blocking kazoo client; SCRAM
    entries are turned into credentials here. Returns the new config."""
    path = ConfigEntityZNode.path("users", sanitize(user))
    try:
        data, _ = zk.get(path)
        current = dict(ConfigEntityZNode.decode(data).config)
    except NoNodeError:
        current = {}
    for name, value in adds.items():
        if name not in scram.MECHANISMS:
            raise ToolError(f"Invalid config for users: {name} (kafkalite's user configs are "
                            f"{', '.join(scram.MECHANISMS)})")
        password, iterations = parse_scram_config(name, value)
        current[name] = scram.make_credential(name, password, iterations).to_config()
    for name in deletes:
        if name not in current:
            raise ToolError(f"Invalid config(s): {name} does not exist for user {user}")
        del current[name]
    encoded = ConfigEntityZNode(current).encode()
    secure = bool(getattr(zk, "auth_data", None))      # logged in: secure ACLs, as Kafka's tools
    try:
        zk.set(path, encoded)
    except NoNodeError:
        zk.create(path, encoded, makepath=True, acl=secure_acls(path) if secure else None)
    notification = ConfigEntityChangeNotification.path_prefix()
    zk.create(notification, ConfigEntityChangeNotification(f"users/{sanitize(user)}").encode(), sequence=True,
              makepath=True, acl=secure_acls(notification) if secure else None)
    return current


def users_main(a: Any) -> int:
    if not a.zookeeper:
        raise ToolError("--entity-type users needs --zookeeper (SCRAM credentials are written to ZooKeeper)")
    if a.entity_name is None:
        raise ToolError("an entity name must be specified with --entity-name")
    login = zookeeper_login()          # as Kafka's tools: a JAAS Client section means secure znodes
    zk = KazooClient(hosts=a.zookeeper, timeout=10,
                     auth_data=[("digest", f"{login[0]}:{login[1]}")] if login else None)
    try:
        zk.start(15)
    except Exception as exc:
        zk.close()
        raise ToolError(f"cannot connect to ZooKeeper at {a.zookeeper}: {exc}") from None
    try:
        if a.describe:
            try:
                data, _ = zk.get(ConfigEntityZNode.path("users", sanitize(a.entity_name)))
                config = ConfigEntityZNode.decode(data).config
            except NoNodeError:
                config = {}
            print(f"Configs for user-principal '{a.entity_name}' are "
                  + ",".join(f"{k}={v}" for k, v in sorted(config.items())))
            return 0
        adds = parse_add_config(a.add_config) if a.add_config else {}
        deletes = [k.strip() for k in (a.delete_config or "").split(",") if k.strip()]
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config and/or --delete-config")
        alter_user_zookeeper(zk, a.entity_name, adds, deletes)
        print(f"Completed updating config for user {a.entity_name}.")
        return 0
    finally:
        zk.stop()
        zk.close()


def quota_main(a) -> int:
    """``--entity-type clients|users``: describe or alter client quotas."""
    from kafkalite.client.admin import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
    types = a.entity_type
    if len(types) != len(set(types)) or any(t not in QUOTA_TYPES for t in types):
        raise ToolError("--entity-type clients and users may be combined (once each), not with topics or brokers")
    names = a.entity_names
    if len(names) > len(types):
        raise ToolError("more --entity-name/--entity-default than --entity-type options")
    if a.alter and len(names) != len(types):
        raise ToolError("--alter needs an --entity-name or --entity-default for every --entity-type")
    entity = {QUOTA_TYPES[t]: (names[i] if i < len(names) else "") for i, t in enumerate(types)}
    with Admin(a.bootstrap_server, **command_config(a, "kafkalite-configs")) as admin:
        if a.describe:
            components = [(kind, MATCH_ANY if name == "" else MATCH_DEFAULT if name is None else MATCH_EXACT,
                           name or None) for kind, name in entity.items()]
            for parts, values in admin.describe_client_quotas(components, strict=True):
                described = ", ".join(
                    (f"the default {'user-principal' if k == 'user' else 'client-id'}" if n is None
                     else f"{'user-principal' if k == 'user' else 'client-id'} '{n}'")
                    for k, n in sorted(parts.items(), key=lambda kv: kv[0] != "user"))
                print(f"Quota configs for {described} are "
                      + ", ".join(f"{k}={v}" for k, v in sorted(values.items())))
            return 0
        adds = parse_add_config(a.add_config) if a.add_config else {}
        deletes = [k.strip() for k in (a.delete_config or "").split(",") if k.strip()]
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config and/or --delete-config")
        ops: dict[str, float | None] = {}
        for key, text in adds.items():
            try:
                ops[key] = float(text)
            except ValueError:
                raise ToolError(f"Invalid value {text!r} for quota {key}: not a number") from None
        for key in deletes:
            if key in ops:
                raise ToolError(f"Invalid entity config: {key} is both added and deleted")
            ops[key] = None
        admin.alter_client_quotas({k: n for k, n in entity.items()}, ops)
    if len(types) == 1 and names[0] is None:
        print(f"Completed updating default config for {types[0]} in the cluster.")
    else:
        described = " and ".join(f"{t[:-1]} {n if n is not None else '<default>'}" for t, n in zip(types, names))
        print(f"Completed updating config for {described}.")
    return 0


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    if a.entity_type == [USERS] and a.zookeeper:
        if len(a.entity_names) != 1 or a.entity_names[0] is None:
            raise ToolError("an entity name must be specified with --entity-name")
        a.entity_name = a.entity_names[0]
        return users_main(a)
    if not a.bootstrap_server:
        raise ToolError("--bootstrap-server is required (or --zookeeper for users' SCRAM credentials)")
    if any(t in QUOTA_TYPES for t in a.entity_type):
        return quota_main(a)
    if len(a.entity_type) > 1 or len(a.entity_names) > 1:
        raise ToolError("topics and brokers take one --entity-type and one entity name")
    a.entity_type = a.entity_type[0]
    a.entity_default = a.entity_names == [None]
    a.entity_name = a.entity_names[0] if a.entity_names and a.entity_names[0] is not None else None
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
    with Admin(a.bootstrap_server, **command_config(a, "kafkalite-configs")) as admin:
        if rtype == TOPIC and name not in admin.client.metadata([name]).topics:
            raise ToolError(f"Topic '{name}' does not exist as expected")
        if a.describe:
            # the cluster default ("") describes its own dynamic configs (any broker answers)
            configs = admin.describe_configs(rtype, name)
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
        ops: list[tuple[str, int, str | None]] = [(k, SET, v) for k, v in adds.items()]
        ops += [(k, DELETE, None) for k in deletes]
        try:
            admin.incremental_alter_configs(rtype, name, ops)
        except ClientError as exc:
            if exc.code != ErrorCode.UNSUPPORTED_VERSION:
                raise
            current: dict[str, str] = {k: e.value or "" for k, e in admin.describe_configs(rtype, name).items()
                                       if e.source == {TOPIC: "DYNAMIC_TOPIC_CONFIG", BROKER: "DYNAMIC_BROKER_CONFIG"
                                                       if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"}[rtype]}
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
