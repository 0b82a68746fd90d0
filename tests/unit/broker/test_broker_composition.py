"""The broker's composition parts on their own: dynamic broker configs reach the reconfigurables
that declare them (in registration order, Kafka's ``DynamicBrokerConfig.addReconfigurable``),
and each typed metadata change reaches its one reaction in ``MetadataRouter``'s table, then the
requests waiting on metadata and the controller."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer
from twisted.internet.testing import MemoryReactorClock

from kafkalite.broker import metadata_sync
from kafkalite.broker.config_changes import ConfigChangeManager, ConfigChangeWatcher
from kafkalite.broker.dynamic_config import DynamicBrokerConfigSync
from kafkalite.broker.metadata_router import MetadataRouter
from kafkalite.broker.metadata_sync import (BrokersChanged, MetadataChange, PartitionStatesChanged, TopicConfigChanged,
                                            TopicRemoved)
from kafkalite.config import BrokerConfig
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperServer
from kafkalite.metadata import METADATA_CHANGED


class Recorder:
    def __init__(self, name: str, configs: frozenset[str] | None, calls: list[tuple[str, frozenset[str]]]) -> None:
        self.name = name
        self.reconfigurable_configs = configs
        self.calls = calls

    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        self.calls.append((f"validate {self.name}", frozenset()))

    def reconfigure(self, changed: set[str]) -> None:
        self.calls.append((self.name, frozenset(changed)))


def fired(clock: MemoryReactorClock, d: defer.Deferred) -> Any:
    box: list[Any] = []
    d.addBoth(box.append)
    for _ in range(50):
        clock.advance(0.1)
        if box:
            break
    assert box and not isinstance(box[0], Exception), box
    return box[0]


def test_reconfigurables_are_told_of_their_own_configs_in_registration_order() -> None:
    """A change of the follower throttle reaches the throttle's reconfigurable and the one that
    wants every change, in the order they registered, and not the listeners' one."""
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    zk = KafkaZkClient(zk=server.client("memory/k"))
    fired(clock, zk.start())
    config = BrokerConfig.from_properties({"zookeeper.connect": "memory", "broker.id": "1"})
    seen: list[set[str]] = []
    sync = DynamicBrokerConfigSync(zk, config, lambda: 1, seen.append)
    calls: list[tuple[str, frozenset[str]]] = []
    sync.add_reconfigurable(Recorder("rates", frozenset({"follower.replication.throttled.rate"}), calls))
    sync.add_reconfigurable(Recorder("listeners", frozenset({"listeners"}), calls))
    sync.add_reconfigurable(Recorder("every", None, calls))
    changes = ConfigChangeManager(zk.zk)
    changes.add_watcher(sync)
    fired(clock, changes.start())
    fired(clock, sync.start())
    assert calls == [] and seen == []
    fired(clock, sync.write("1", {"follower.replication.throttled.rate": "5000"}))
    clock.advance(0.1)
    for _ in range(20):
        clock.advance(0.1)
    changed = frozenset({"follower.replication.throttled.rate"})
    # asked first (a config read from ZooKeeper is validated too), then told, each in order
    assert calls == [("validate rates", frozenset()), ("validate every", frozenset()),
                     ("rates", changed), ("every", changed)]
    assert seen == [set(changed)]                      # the plain listener comes after them
    assert config["follower.replication.throttled.rate"] == 5000


def router(calls: list[Any]) -> MetadataRouter:
    info = SimpleNamespace(assignment={0: [1, 2]})
    metadata = SimpleNamespace(topics={"t": info}, states={("t", 0): "state"})
    replicas = SimpleNamespace(
        apply_states=lambda batch: calls.extend(("apply_state", s.topic, s.partition, s.is_new) for s in batch),
        hosted=lambda t: [], remove_replica=lambda t, p: calls.append(("remove_replica", t, p)),
        update_config=lambda t: calls.append(("update_config", t)),
        remove_topic=lambda t, delete: calls.append(("remove_topic", t, delete)))
    topic_configs = SimpleNamespace(forget=lambda t: calls.append(("forget", t)),
                                    effective=lambda t: {"leader.replication.throttled.replicas": [],
                                                         "follower.replication.throttled.replicas": []})
    quotas = SimpleNamespace(replication=SimpleNamespace(
        remove_topic=lambda t: calls.append(("quota_remove", t)),
        update_topic=lambda t, leader, follower, broker: calls.append(("throttles", t))))
    controller = SimpleNamespace(on_states_changed=lambda keys: calls.append(("controller_states", tuple(keys))),
                                 reconcile=lambda: calls.append(("reconcile",)),
                                 on_controller_changed=lambda: calls.append(("controller_changed",)))
    purgatory = SimpleNamespace(check=lambda key: calls.append(("check", key)))
    sync = SimpleNamespace(state_czxids={("t", 0): 50})
    return MetadataRouter(lambda: 1, lambda: 10, metadata, lambda: sync, replicas, topic_configs,  # type: ignore[arg-type]
                          quotas, controller, purgatory)  # type: ignore[arg-type]


def test_each_change_type_has_its_reaction_then_wakes_waiters_and_the_controller() -> None:
    calls: list[Any] = []
    r = router(calls)
    r.on_change(PartitionStatesChanged((("t", 0), ("t", 7), ("gone", 0))))
    # the state znode is younger than our first registration (czxid 50 > 10): a new replica; a
    # partition without a state or topic here is skipped; one wake-up and one controller call
    # for the whole batch
    assert calls == [("apply_state", "t", 0, True), ("check", METADATA_CHANGED),
                     ("controller_states", (("t", 0), ("t", 7), ("gone", 0)))]
    calls.clear()
    r.on_change(TopicConfigChanged("t"))
    assert calls == [("update_config", "t"), ("throttles", "t"), ("check", METADATA_CHANGED), ("reconcile",)]
    calls.clear()
    r.on_change(TopicRemoved("t"))
    assert calls == [("forget", "t"), ("quota_remove", "t"), ("remove_topic", "t", True),
                     ("check", METADATA_CHANGED), ("reconcile",)]
    calls.clear()
    r.on_change(BrokersChanged())                      # no reaction of its own
    assert calls == [("check", METADATA_CHANGED), ("reconcile",)]


def test_every_change_type_is_a_dataclass_the_router_knows() -> None:
    """Each kind of change metadata_sync emits is a MetadataChange subclass; those with a reaction
    are exactly the router's table (a new kind must be added to one or the other on purpose)."""
    kinds = {c for c in vars(metadata_sync).values()
             if isinstance(c, type) and issubclass(c, MetadataChange) and c is not MetadataChange}
    assert len(kinds) == 9
    r = router([])
    assert set(r.reactions) <= kinds
    assert {k.__name__ for k in kinds - set(r.reactions)} == {
        "BrokersChanged", "DeletingChanged", "PreferredElectionRequested", "ReassignmentRequested"}


def test_state_deliveries_of_one_reactor_turn_are_emitted_as_one_batch() -> None:
    """A controller round's writes come back through thousands of state watches: the sync keeps
    the cache current at each delivery but emits one PartitionStatesChanged for all that arrived
    before its call_soon job runs (in delivery order, each key once), so the broker applies them
    in one pass."""
    from kafkalite.metadata import MetadataCache
    from zk_schema.topics import TopicPartitionStateZNode
    emitted: list[Any] = []
    soon: list[Any] = []
    sync = metadata_sync.MetadataSync(None, MetadataCache(), emitted.append, call_soon=soon.append)  # type: ignore[arg-type]
    keys = [("t", 2), ("t", 0), ("u", 1)]
    for key in keys:
        sync.state_watches[key] = None

    def deliver(key: tuple[str, int], leader: int, version: int) -> None:
        data = TopicPartitionStateZNode(leader, version, (leader,), 1).encode()
        sync._state_changed(key[0], key[1], data, SimpleNamespace(version=version, czxid=7))
    for version, key in enumerate(keys + [("t", 2)]):
        deliver(key, 1 + version % 3, version)
    deliver(("gone", 0), 1, 0)                          # not watched (topic removed): ignored
    assert emitted == [] and len(soon) == 1              # one job for the whole turn
    assert sync.cache.states[("t", 2)].leader_epoch == 3  # the cache is current at once
    soon.pop()()
    assert emitted == [PartitionStatesChanged((("t", 2), ("t", 0), ("u", 1)))]
    deliver(("t", 0), 2, 9)                              # the next turn: a new batch
    assert len(soon) == 1
    soon.pop()()
    assert emitted[-1] == PartitionStatesChanged((("t", 0),))


class EntityRecorder(ConfigChangeWatcher):
    def __init__(self, name: str, seen: list[tuple[str, str]]) -> None:
        self.what, self.seen = name, seen

    def on_entity_change(self, entity_path: str) -> None:
        self.seen.append((self.what, entity_path))


def test_one_config_change_listener_serves_every_config_sync() -> None:
    """Kafka's ZkConfigManager: one listener on /config/changes; each changed entity of a batch
    goes once to every registered sync, in order (the dynamic broker configs, the quotas); what
    existed before the start is not replayed."""
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    zk = KafkaZkClient(zk=server.client("memory/k"))
    fired(clock, zk.start())
    fired(clock, zk.set_entity_config("clients/old", {"producer_byte_rate": "1"}))
    seen: list[tuple[str, str]] = []
    changes = ConfigChangeManager(zk.zk)
    changes.add_watcher(EntityRecorder("brokers", seen))
    changes.add_watcher(EntityRecorder("quotas", seen))
    fired(clock, changes.start())
    fired(clock, zk.set_entity_config("brokers/1", {"log.cleaner.threads": "2"}))
    fired(clock, zk.set_entity_config("clients/app", {"producer_byte_rate": "5"}))
    for _ in range(10):
        clock.advance(0.1)
    assert seen == [("brokers", "brokers/1"), ("quotas", "brokers/1"), ("brokers", "clients/app"),
                    ("quotas", "clients/app")]


def test_initial_view_waits_for_every_watch_start_set_to_deliver_once() -> None:
    """The broker serves clients only once its cache holds what ZooKeeper held at start: the
    brokers' registrations, the topics' assignments and configs, and the partition states those
    assignments name (watches set by a delivery, before that delivery's watch counts as done)."""
    from kafkalite.metadata import MetadataCache
    from zk_schema.topics import TopicZNode

    class Zk:
        def __init__(self) -> None:
            self.watches: dict[str, tuple[Any, defer.Deferred]] = {}

        def watch_data(self, path: str, deliver: Any) -> defer.Deferred:
            d: defer.Deferred = defer.Deferred()
            self.watches[path] = (deliver, d)
            return d

        def first_delivery(self, path: str, data: bytes | None) -> None:
            deliver, d = self.watches.pop(path)
            deliver(data, SimpleNamespace(version=0, czxid=1))
            d.callback(SimpleNamespace(cancel=lambda: None))

    zk = Zk()
    sync = metadata_sync.MetadataSync(zk, MetadataCache(), lambda change: None)  # type: ignore[arg-type]
    sync._brokers_changed(["1"])
    sync._topics_changed(["t"])
    fired: list[Any] = []
    sync.initial_view().addCallback(fired.append)
    sync.loaded = True                                   # start() has set its child watches
    zk.first_delivery("/brokers/ids/1", None)
    zk.first_delivery("/config/topics/t", None)
    assert not fired
    zk.first_delivery("/brokers/topics/t", TopicZNode({0: (1,), 1: (1,)}).encode())
    assert sorted(zk.watches) == ["/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/1/state"]
    assert not fired, "a partition state not yet delivered"
    zk.first_delivery("/brokers/topics/t/partitions/0/state", None)
    assert not fired
    zk.first_delivery("/brokers/topics/t/partitions/1/state", None)
    assert fired == [None]
    assert sync.initial_view().called                    # later callers: at once
