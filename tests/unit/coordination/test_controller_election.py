"""Controller election against the in-memory ZooKeeper when answers are lost.

The election is one multi (create the ephemeral ``/controller``, bump ``/controller_epoch``).
When the multi is applied but its answer lost, the client re-sends it and meets NodeExists on
its own znode; that broker is the controller (Kafka's ``checkControllerAndEpoch``). Taking it
as a lost election left a cluster whose ``/controller`` named a broker that never acted as
controller: topics created then never got leaders.
"""
from __future__ import annotations

import pytest
from twisted.internet import defer

from kafkalite.controller.controller import ELECTION_RETRY_S, Controller
from kafkalite.coordination import ConnectionLossError, KafkaZkClient, SessionState
from kafkalite.coordination.election import elect_controller
from kafkalite.metadata import MetadataCache
from tests.unit.coordination.test_memory_zookeeper import Harness
from zk_schema import ControllerEpochZNode, ControllerZNode

pytestmark = pytest.mark.unit


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_election_whose_answer_was_lost_is_won(h: Harness) -> None:
    zk = h.started()
    states = h.states(zk)
    real_multi = zk.multi

    def multi_losing_its_answer(ops):  # the reads before it name the same paths
        h.server.fail_next("/controller", ConnectionLossError, applied=True, client=zk)
        return real_multi(ops)
    zk.multi = multi_losing_its_answer  # type: ignore[method-assign]
    result = h.result(elect_controller(zk, 7))
    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]     # the answer was lost
    assert result.won and result.controller_id == 7 and result.epoch == 1
    epoch_stat = h.server.stat("/kafka" + ControllerEpochZNode.PATH)
    assert epoch_stat is not None and result.epoch_zk_version == epoch_stat.version
    assert ControllerZNode.decode(h.server.dump("/kafka/controller")["/kafka/controller"]).broker_id == 7


def test_own_broker_id_in_another_sessions_znode_is_not_won(h: Harness) -> None:
    """A restarted broker meets its previous process's /controller (same id, older session):
    not its own until that session expires and someone wins a fresh election."""
    old, new = h.started(), h.started()
    assert h.result(elect_controller(old, 7)).won
    again = h.result(elect_controller(new, 7))
    assert not again.won and again.controller_id == 7
    assert h.result(elect_controller(old, 7)).won     # the owning session asking again: still won


def test_a_rival_that_won_first_is_reported(h: Harness) -> None:
    a, b = h.started(), h.started()
    assert h.result(elect_controller(a, 1)).won
    lost = h.result(elect_controller(b, 2))
    assert not lost.won and lost.controller_id == 1 and lost.epoch == 1


def test_failed_election_is_tried_again_while_the_seat_is_vacant(h: Harness) -> None:
    """An attempt that fails (not lost to a rival) is retried: no /controller change would
    trigger another one."""
    kzc = KafkaZkClient(zk=h.started())
    h.result(kzc.create_persistent_paths())
    controller = Controller(3, kzc, MetadataCache(), lambda: set(), lambda t: False, reactor=h.clock)
    calls = {"n": 0}
    real = kzc.elect_controller

    def flaky(broker_id: int) -> defer.Deferred:
        calls["n"] += 1
        if calls["n"] == 1:
            return defer.fail(RuntimeError("injected"))
        return real(broker_id)
    kzc.elect_controller = flaky  # type: ignore[method-assign]
    h.result(controller.maybe_elect())
    assert not controller.active and calls["n"] == 1
    h.clock.advance(ELECTION_RETRY_S)
    for _ in range(50):
        h.clock.advance(0)
    assert controller.active and calls["n"] == 2
