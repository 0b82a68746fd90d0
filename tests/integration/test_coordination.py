"""kafkalite.coordination against a real ZooKeeper process and a real Twisted reactor.

Reactor choice: one *private* reactor instance (not the global ``twisted.internet.reactor``)
runs in a daemon thread for this module, so other test modules can still use the global
reactor or ``task.Clock``. Test code (the pytest thread) hands work to it with
``callFromThread`` and blocks on the outcome, which keeps the rule that every coordination
call runs in the reactor thread. Every test uses its own chroot, so tests share one
ZooKeeper without seeing each other's znodes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from twisted.internet import defer
from twisted.internet.epollreactor import EPollReactor

from kafkalite.coordination import (BrokerIdInUseError, ControllerMovedError, CreateOp,
                                    InvalidTopicError, KafkaZkClient, SessionState,
                                    TopicAlreadyExistsError, Updated, ZkVersionConflictError,
                                    ZooKeeperClient, election)
from kafkalite.metadata import LeaderAndIsr
from tests.support.zookeeper import ZooKeeperServer, expire_session
from tests.support.waiting import wait_for
from zk_schema import PERSISTENT_PATHS, BrokerRegistration, ClusterIdZNode, EndPoint, TopicZNode


class ReactorThread:
    """A private reactor running in a background thread; ``call`` runs fn there and waits."""

    def __init__(self) -> None:
        self.reactor = EPollReactor()
        self.thread = threading.Thread(target=self.reactor.run,
                                       kwargs={"installSignalHandlers": False},
                                       name="test-reactor", daemon=True)

    def start(self) -> None:
        self.thread.start()
        self.call(lambda: None)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30.0, **kwargs: Any) -> Any:
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            d = defer.maybeDeferred(fn, *args, **kwargs)

            def ok(value: Any) -> None:
                box["value"] = value
                done.set()

            def err(f: Any) -> None:
                box["failure"] = f
                done.set()
            d.addCallbacks(ok, err)
        self.reactor.callFromThread(run)
        if not done.wait(timeout):
            raise TimeoutError(f"{fn!r} did not finish in {timeout} s")
        if "failure" in box:
            box["failure"].raiseException()
        return box["value"]

    def stop(self) -> None:
        self.reactor.callFromThread(self.reactor.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def rt() -> Iterator[ReactorThread]:
    thread = ReactorThread()
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture
def chroot_connect(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.hosts}/test_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def clients(rt: ReactorThread) -> Iterator[Callable[..., KafkaZkClient]]:
    """Factory of started KafkaZkClients on the private reactor; all stopped afterwards."""
    made: list[KafkaZkClient] = []

    def make(connect: str, session_timeout_ms: int = 2000, **kwargs: Any) -> KafkaZkClient:
        client = KafkaZkClient(connect, session_timeout_ms=session_timeout_ms,
                               connect_timeout_ms=10000, reactor=rt.reactor, **kwargs)
        made.append(client)
        rt.call(client.start)
        return client
    yield make
    for client in made:
        rt.call(client.stop)


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port),),
                              timestamp_ms=1700000000000 + broker_id)


def test_persistent_paths_and_chroot_created(rt, clients, zookeeper):
    """A chrooted connect string creates the chroot, and Kafka's startup paths land inside it."""
    chroot = f"/kafka_{uuid.uuid4().hex[:8]}/nested"
    kzc = clients(zookeeper.hosts + chroot)
    rt.call(kzc.create_persistent_paths)
    rt.call(kzc.create_persistent_paths)  # idempotent
    raw = clients(zookeeper.hosts).zk
    for path in PERSISTENT_PATHS:
        assert rt.call(raw.exists, chroot + path) is not None, path
    assert rt.call(raw.exists, "/brokers") is None  # nothing leaked outside the chroot
    assert sorted(rt.call(raw.get_children, chroot)) == sorted(
        {p.split("/")[1] for p in PERSISTENT_PATHS})


def test_cluster_id_created_once_and_stable(rt, clients, chroot_connect):
    """Two brokers racing ensure_cluster_id agree; the stored payload is Kafka's JSON."""
    a, b = clients(chroot_connect), clients(chroot_connect)
    first = rt.call(lambda: defer.gatherResults([a.ensure_cluster_id(), b.ensure_cluster_id()]))
    assert first[0] == first[1] and len(first[0]) == 22
    assert rt.call(a.ensure_cluster_id) == first[0]
    data, _ = rt.call(a.zk.get, "/cluster/id")
    assert json.loads(data) == {"version": "1", "id": first[0]}
    assert ClusterIdZNode.decode(data).id == first[0]


def test_broker_registration_json_and_live_brokers_watch(rt, clients, chroot_connect):
    """The registration znode is ephemeral, owned by our session, holds Kafka's v5 JSON, and
    the broker watch reports joins and leaves."""
    a = clients(chroot_connect)
    rt.call(a.create_persistent_paths)
    seen: list[list[int]] = []
    rt.call(a.zk.watch_children, "/brokers/ids", lambda ids: seen.append(sorted(int(i) for i in ids)))
    czxid = rt.call(a.register_broker, registration(1))
    data, stat = rt.call(a.zk.get, "/brokers/ids/1")
    assert stat.ephemeralOwner == a.zk.session_id and stat.czxid == czxid
    assert json.loads(data) == {
        "version": 5, "host": "127.0.0.1", "port": 9092, "jmx_port": -1,
        "timestamp": "1700000000001", "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "features": {}}
    b = clients(chroot_connect)
    rt.call(b.register_broker, registration(2, 9093))
    assert rt.call(a.get_live_brokers) == {1: registration(1), 2: registration(2, 9093)}
    wait_for(lambda: seen and seen[-1] == [1, 2], what="watch to see [1, 2]")
    rt.call(b.stop)
    wait_for(lambda: seen[-1] == [1], what="watch to see broker 2 leave")
    assert seen[0] == [] and [1, 2] in seen


def test_second_live_registration_with_same_id_refused(rt, clients, chroot_connect):
    """A different live session holding /brokers/ids/1 makes registration fail, after the
    bounded wait, with BrokerIdInUseError saying the id is already registered."""
    a = clients(chroot_connect)
    rt.call(a.register_broker, registration(1))
    b = clients(chroot_connect, session_timeout_ms=1000, registration_grace_ms=300)
    started = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match="broker.id 1 is already registered"):
        rt.call(b.register_broker, registration(1, 9999))
    assert time.monotonic() - started >= 1.0  # it did wait for a possible expiry first
    _, stat = rt.call(a.zk.get, "/brokers/ids/1")
    assert stat.ephemeralOwner == a.zk.session_id


def test_registration_waits_out_a_killed_previous_incarnation(rt, clients, chroot_connect):
    """kill -9 + fast restart: the old process's session still owns the node; we retry until
    ZooKeeper expires it and then own the node ourselves."""
    hosts, _, chroot = chroot_connect.partition("/")
    script = (
        "import sys\nfrom kazoo.client import KazooClient\n"
        f"zk = KazooClient(hosts={chroot_connect!r}, timeout=1.0)\nzk.start(10)\n"
        "zk.ensure_path('/brokers/ids')\n"
        f"zk.create('/brokers/ids/5', {registration(5).encode()!r}, ephemeral=True)\n"
        "print('registered', flush=True)\nsys.stdin.read()\n")
    zk_root = clients(hosts)
    rt.call(zk_root.zk.ensure_path, "/" + chroot)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ""})
    try:
        assert proc.stdout.readline().strip() == b"registered"
        proc.kill()
        proc.wait(10)
        b = clients(chroot_connect, session_timeout_ms=1000, registration_grace_ms=3000)
        old = rt.call(b.zk.get, "/brokers/ids/5")[1].ephemeralOwner
        assert old != b.zk.session_id
        czxid = rt.call(b.register_broker, registration(5))
        _, stat = rt.call(b.zk.get, "/brokers/ids/5")
        assert stat.ephemeralOwner == b.zk.session_id and stat.czxid == czxid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_session_expiry_reregisters_and_reports_once(rt, clients, chroot_connect, zookeeper):
    """Forced expiry (twin client): listeners see LOST and NEW_SESSION exactly once, the
    broker znode reappears owned by the new session, and the re-registration is reported."""
    a = clients(chroot_connect)
    states: list[SessionState] = []
    recreated: list[tuple[str, int]] = []
    a.add_state_listener(states.append)
    a.add_reregistration_listener(lambda path, czxid: recreated.append((path, czxid)))
    first_czxid = rt.call(a.register_broker, registration(3))
    old_session = a.zk.session_id
    expire_session(rt.call(lambda: a.zk.kazoo_client_id), zookeeper.hosts)
    wait_for(lambda: recreated, what="re-registration after expiry")
    assert a.zk.session_id != old_session
    _, stat = rt.call(a.zk.get, "/brokers/ids/3")
    assert stat.ephemeralOwner == a.zk.session_id
    assert recreated == [("/brokers/ids/3", stat.czxid)] and stat.czxid != first_czxid
    assert states.count(SessionState.LOST) == 1 and states.count(SessionState.NEW_SESSION) == 1
    assert states[-1] is SessionState.NEW_SESSION
    assert all(x is not y for x, y in zip(states, states[1:]))  # once per change


def test_topic_creation_writes_kafka_znodes(rt, clients, chroot_connect):
    """create_topic writes /config/topics/<t> and /brokers/topics/<t> as Kafka does; duplicates
    and '.'/'_' collisions are refused; partition state, configs and deletion work."""
    kzc = clients(chroot_connect)
    rt.call(kzc.create_persistent_paths)
    node = rt.call(kzc.create_topic, "orders.v1", {0: [1], 1: [1]}, {"retention.ms": "1000"})
    data, _ = rt.call(kzc.zk.get, "/config/topics/orders.v1")
    assert data == b'{"version":1,"config":{"retention.ms":"1000"}}'
    data, _ = rt.call(kzc.zk.get, "/brokers/topics/orders.v1")
    assert json.loads(data) == {"version": 3, "partitions": {"0": [1], "1": [1]},
                                "adding_replicas": {}, "removing_replicas": {},
                                "topic_id": node.topic_id}
    with pytest.raises(TopicAlreadyExistsError):
        rt.call(kzc.create_topic, "orders.v1", {0: [1]}, {})
    with pytest.raises(InvalidTopicError, match="collides"):
        rt.call(kzc.create_topic, "orders_v1", {0: [1]}, {})
    assert rt.call(kzc.get_all_topics) == ["orders.v1"]
    assert rt.call(kzc.get_topic_assignment, "orders.v1").value == node

    fence = rt.call(kzc.elect_controller, 1).fence
    state = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=fence.epoch)
    for p in (0, 1):
        assert rt.call(kzc.create_leader_and_isr, "orders.v1", p, state, fence) == state.with_version(0)
    data, _ = rt.call(kzc.zk.get, "/brokers/topics/orders.v1/partitions/1/state")
    assert json.loads(data) == {"version": 1, "leader": 1, "leader_epoch": 0,
                                "controller_epoch": fence.epoch, "isr": [1, 2]}
    current = rt.call(kzc.get_partition_state, "orders.v1", 0)
    assert current == state.with_version(0)
    # a leader's ISR change: no controller fence, the znode version is the fence
    shrunk = rt.call(kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((1,)))
    assert shrunk.isr == (1,) and shrunk.zk_version == 1
    # the same write again from the old version: the znode already holds it (a reply lost to a
    # connection loss), so it counts as done at the current version
    assert rt.call(kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((1,))) == shrunk
    # a different write from a stale version loses, with a typed error
    with pytest.raises(ZkVersionConflictError) as lost:
        rt.call(kzc.update_leader_and_isr, "orders.v1", 0, current.with_isr((2,)))
    assert lost.value.expected_version == 0 and lost.value.current_version == 1
    moved = rt.call(kzc.update_leader_and_isr, "orders.v1", 0,
                    LeaderAndIsr(2, 1, (2,), fence.epoch, shrunk.zk_version), fence)
    assert moved.zk_version == 2 and rt.call(kzc.get_partition_state, "orders.v1", 0) == moved

    grown = TopicZNode({0: [1], 1: [1], 2: [1]}, topic_id=node.topic_id)
    assert isinstance(rt.call(kzc.set_topic_assignment, "orders.v1", grown, 0), Updated)
    note = rt.call(kzc.set_topic_config, "orders.v1", {"cleanup.policy": "compact"})
    assert note.startswith("/config/changes/config_change_")
    assert rt.call(kzc.zk.get, note)[0] == b'{"version":2,"entity_path":"topics/orders.v1"}'
    assert rt.call(kzc.get_topic_config, "orders.v1") == {"cleanup.policy": "compact"}

    assert rt.call(kzc.mark_topic_for_deletion, "orders.v1") is True
    assert rt.call(kzc.mark_topic_for_deletion, "orders.v1") is False
    assert rt.call(kzc.get_topics_marked_for_deletion) == ["orders.v1"]
    rt.call(kzc.delete_topic, "orders.v1", fence)
    for path in ("/brokers/topics/orders.v1", "/config/topics/orders.v1",
                 "/admin/delete_topics/orders.v1"):
        assert rt.call(kzc.zk.exists, path) is None


def test_producer_id_blocks_disjoint_across_clients(rt, clients, chroot_connect):
    """Two brokers allocating concurrently never get overlapping producer-id blocks."""
    a, b = clients(chroot_connect), clients(chroot_connect)
    rt.call(a.create_persistent_paths)

    def race() -> defer.Deferred:
        return defer.gatherResults([c.allocate_producer_id_block(i)
                                    for i, c in ((1, a), (2, b)) for _ in range(5)])
    blocks = sorted(rt.call(race))
    assert blocks == [(i * 1000, i * 1000 + 999) for i in range(10)]
    data, _ = rt.call(a.zk.get, "/latest_producer_id_block")
    assert json.loads(data)["block_end"] == "9999"


def test_controller_election_and_fencing(rt, clients, chroot_connect):
    """One winner, epoch bumped; the winner's fenced writes succeed until another controller
    takes over, after which its stale epoch zkVersion makes them fail."""
    a, b = clients(chroot_connect), clients(chroot_connect)
    seen: list[int | None] = []
    rt.call(election.watch_controller, b.zk, seen.append)
    results = rt.call(lambda: defer.gatherResults([a.elect_controller(1), b.elect_controller(2)]))
    winners = [r for r in results if r.won]
    assert len(winners) == 1
    win = winners[0]
    assert win.epoch == 1 and all(r.controller_id == win.controller_id for r in results)
    assert rt.call(a.zk.get, "/controller_epoch")[0] == b"1"
    wait_for(lambda: seen and seen[-1] == win.controller_id, what="controller watch")
    winner, loser = (a, b) if win.controller_id == 1 else (b, a)
    rt.call(winner.create_persistent_paths)
    rt.call(winner.create_topic, "t", {0: [1, 2], 1: [1, 2]})
    state = LeaderAndIsr(1, 0, (1,), win.epoch)
    rt.call(winner.create_leader_and_isr, "t", 0, state, win.fence)

    rt.call(loser.zk.delete, "/controller")  # as if the winner's session ended
    wait_for(lambda: seen[-1] is None, what="controller watch to see deletion")
    second = rt.call(loser.elect_controller, 3 - win.controller_id)
    assert second.won and second.epoch == 2 and second.epoch_zk_version != win.epoch_zk_version
    with pytest.raises(ControllerMovedError):
        rt.call(winner.update_leader_and_isr, "t", 0, LeaderAndIsr(2, 1, (2,), win.epoch, 0), win.fence)
    with pytest.raises(ControllerMovedError):
        rt.call(winner.create_leader_and_isr, "t", 1, state, win.fence)
    assert rt.call(winner.get_partition_state, "t", 0) == state.with_version(0)
    assert rt.call(winner.zk.exists, "/brokers/topics/t/partitions/1/state") is None
    wait_for(lambda: seen[-1] == second.controller_id, what="controller watch to see new one")


def test_raw_client_multi_reports_failed_op(rt, clients, chroot_connect):
    """A multi-op whose second op fails is rolled back and reported, never silently ignored."""
    from kafkalite.coordination import NoNodeError, SetDataOp, TransactionFailedError
    zk: ZooKeeperClient = clients(chroot_connect).zk
    with pytest.raises(TransactionFailedError) as info:
        rt.call(zk.multi, [CreateOp("/a"), SetDataOp("/missing", b"x")])
    assert info.value.index == 1 and isinstance(info.value.error, NoNodeError)
    assert rt.call(zk.exists, "/a") is None


def test_log_dir_event_notifications_created_watched_read_and_deleted_fenced(rt, clients, chroot_connect):
    """A broker's log-dir event is Kafka's sequential znode with Kafka's JSON; the controller's
    watch sees it, reads the broker ids in order, and deletes what it consumed, fenced on its
    controller epoch (a deposed controller's delete fails and deletes nothing)."""
    broker, controller = clients(chroot_connect), clients(chroot_connect)
    rt.call(controller.create_persistent_paths)
    seen: list[list[int]] = []
    rt.call(controller.watch_log_dir_events, seen.append)
    assert rt.call(controller.get_log_dir_event_notifications) == []
    first = rt.call(broker.propagate_log_dir_event, 3)
    assert first == "/log_dir_event_notification/log_dir_event_0000000000"
    assert rt.call(broker.zk.get, first)[0] == b'{"version":1,"broker":3,"event":1}'
    rt.call(broker.propagate_log_dir_event, 3)
    rt.call(broker.propagate_log_dir_event, 4)
    rt.call(broker.zk.create, "/log_dir_event_notification/stray", b"")
    wait_for(lambda: seen and seen[-1] == [0, 1, 2], what="log dir event watch")
    sequences = rt.call(controller.get_log_dir_event_notifications)
    assert sequences == [0, 1, 2]
    assert rt.call(controller.get_broker_ids_from_log_dir_events, [2, 0, 7]) == [4, 3]

    win = rt.call(controller.elect_controller, 1)
    assert win.won
    with pytest.raises(ControllerMovedError):
        rt.call(controller.delete_log_dir_event_notifications, [0], win.epoch_zk_version + 1)
    assert rt.call(controller.get_log_dir_event_notifications) == [0, 1, 2]
    assert rt.call(controller.delete_log_dir_event_notifications, [0, 2, 9], win.epoch_zk_version) == 2
    assert rt.call(controller.get_log_dir_event_notifications) == [1]
    wait_for(lambda: seen[-1] == [1], what="log dir event watch after deletion")
    assert rt.call(controller.delete_log_dir_event_notifications) == 1
    assert rt.call(controller.get_log_dir_event_notifications) == []
