"""The configuration tables claim nothing the code does not do.

Every broker and topic property in kafkalite/config.py is either marked ``ignored`` (accepted,
reported by DescribeConfigs, documented as having no effect) or read by broker-side code outside
config.py. "Read" is checked in the source: a config lookup ``["<name>"]`` in a broker-side
module, a storage LogConfig field (``.<field>``, or a LogConfig property over it) used by storage
outside its config module, a
BrokerConfig accessor that reads the key and is itself used outside config.py, or a broker
synonym of a topic property that is read. It cannot prove the meaning is Kafka's (the behaviour
tests do that), but a property that nothing reads fails here unless the table says so.
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from kafkalite.config import (BROKER_KEYS, IGNORED_NOTE, TOPIC_KEYS, BrokerConfig, ConfigKey,
                              TopicKey)

ROOT = Path(__file__).resolve().parents[2]
#: Broker-side packages: they run in kafkalite-server. Tools and clients (cli/, client/, cluster/,
#: demo.py) are left out: they use some of the same names as client properties.
BROKER_SIDE = ["kafkalite/broker", "kafkalite/net", "kafkalite/replication", "kafkalite/storage",
               "kafkalite/group", "kafkalite/txn", "kafkalite/controller", "kafkalite/coordination", "zk_schema"]

#: Broker keys BrokerConfig itself turns into what the broker uses: key -> accessor.
READ_BY_ACCESSOR = {
    "broker.id": "broker_id", "listeners": "listeners", "host.name": "listeners", "port": "listeners",
    "advertised.listeners": "advertised_listeners",
    "log.dirs": "log_dirs", "log.dir": "log_dirs", "zookeeper.session.timeout.ms": "zookeeper_session_timeout_ms",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
    "listener.security.protocol.map": "security_protocol", "inter.broker.listener.name": "inter_broker_listener",
    "security.inter.broker.protocol": "inter_broker_listener", "sasl.jaas.config": "jaas_config",
}
#: Keys whose only accepted value is the behaviour kafkalite has (BrokerConfig._check refuses others).
ENFORCED_AT_PARSE = {"zookeeper.set.acl", "ssl.keystore.type", "ssl.truststore.type", "ssl.truststore.password",
                     "ssl.keystore.password"}


def _sources(dirs: list[str], skip: tuple[str, ...]) -> str:
    texts = []
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            if str(path.relative_to(ROOT)) not in skip:
                texts.append(path.read_text())
    return "\n".join(texts)


#: storage/config.py is left out too: it names every storage key once, to take its default.
BROKER_CODE = _sources(BROKER_SIDE, skip=("kafkalite/config.py", "kafkalite/storage/config.py"))
STORAGE_CODE = _sources(["kafkalite/storage"], skip=("kafkalite/storage/config.py",))


def looked_up(name: str) -> bool:
    return f'["{name}"]' in BROKER_CODE or f"['{name}']" in BROKER_CODE


def used_in_storage(name: str) -> bool:
    return re.search(rf"\.{re.escape(name)}\b", STORAGE_CODE) is not None


def field_read(field: str) -> bool:
    """Storage reads the LogConfig field, directly or through a LogConfig property over it
    (``log_append_time`` over ``message_timestamp_type``)."""
    from kafkalite.storage.config import LogConfig

    if used_in_storage(field):
        return True
    return any(isinstance(member, property) and f"self.{field}" in inspect.getsource(member.fget)
               and used_in_storage(name) for name, member in vars(LogConfig).items())


def topic_key_read(key: TopicKey) -> bool:
    return bool(key.field and field_read(key.field)) or looked_up(key.name)


def broker_key_read(key: ConfigKey) -> bool:
    if looked_up(key.name):
        return True
    if any(key.name in t.synonyms and not t.ignored and topic_key_read(t) for t in TOPIC_KEYS.values()):
        return True
    accessor = READ_BY_ACCESSOR.get(key.name)
    if accessor is not None:
        source = inspect.getsource(getattr(BrokerConfig, accessor).fget if isinstance(
            getattr(BrokerConfig, accessor), property) else getattr(BrokerConfig, accessor))
        return f'"{key.name}"' in source and re.search(rf"\.{accessor}\b", BROKER_CODE) is not None
    if key.name in ENFORCED_AT_PARSE:
        return f'"{key.name}"' in inspect.getsource(BrokerConfig._check)
    return False


def test_every_property_not_marked_ignored_is_read_by_the_broker() -> None:
    unread = [k.name for k in BROKER_KEYS.values() if not k.ignored and not broker_key_read(k)]
    unread += [k.name for k in TOPIC_KEYS.values() if not k.ignored and not topic_key_read(k)]
    assert not unread, f"declared implemented but read by no broker-side code: {unread}"


def test_properties_marked_ignored_are_not_read() -> None:
    """The converse: a key the table calls ignored is looked up nowhere, carries no LogConfig
    field, and is no synonym of a topic key that is read (its doc would be wrong)."""
    for key in BROKER_KEYS.values():
        if key.ignored:
            assert not looked_up(key.name), key.name
            assert not any(key.name in t.synonyms and not t.ignored for t in TOPIC_KEYS.values()), key.name
    for tkey in TOPIC_KEYS.values():
        if tkey.ignored:
            assert tkey.field is None and not looked_up(tkey.name), tkey.name


def test_ignored_properties_say_so_in_describe_configs_and_the_docs() -> None:
    """DescribeConfigs still reports them (value, source) with a documentation that starts with
    the note; the generated tables of docs/configuration.md carry the same text."""
    cfg = BrokerConfig.from_properties({"zookeeper.connect": "h:1", "num.io.threads": "16"})
    rows = {r.name: r for r in cfg.describe_broker()}
    assert rows["num.io.threads"].value == 16 and rows["num.io.threads"].source == 4
    assert rows["num.io.threads"].doc.startswith(IGNORED_NOTE)
    assert not rows["fetch.max.bytes"].doc.startswith(IGNORED_NOTE)
    topic_rows = {r.name: r for r in cfg.describe_topic({"preallocate": "true"})}
    assert topic_rows["preallocate"].value is True and topic_rows["preallocate"].doc.startswith(IGNORED_NOTE)
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key in [*BROKER_KEYS.values(), *TOPIC_KEYS.values()]:
        line = next(line for line in page.splitlines() if line.startswith(f"| `{key.name}` |"))
        assert (IGNORED_NOTE in line) == key.ignored, key.name
