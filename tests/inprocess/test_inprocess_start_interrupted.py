"""A shutdown requested while the broker is still starting (SIGTERM during a long log load or
metadata sync) ends the start-up with StartupInterrupted, whether the step it cut short then
fails (its ZooKeeper session is closed) or comes back: nothing starts after shutdown() has run,
and run_broker exits 0 for it (a failed start-up exits 1)."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer
from twisted.python.failure import Failure

from kafkalite.broker.server import KafkaBroker, StartupInterrupted
from tests.support.inprocess import InProcessCluster


@pytest.mark.parametrize("late_sync", ["runs on the closed session", "comes back"])
def test_shutdown_during_the_metadata_sync_ends_the_start_up_before_its_loops(tmp_path, late_sync) -> None:
    cluster = InProcessCluster(tmp_path, size=1)
    gate: defer.Deferred = defer.Deferred()

    def slow_sync(broker: KafkaBroker) -> None:
        real_start = broker.sync.start

        def start() -> Any:
            if late_sync == "comes back":
                return gate
            return gate.addCallback(lambda _: real_start())
        broker.sync.start = start            # type: ignore[method-assign]

    broker = cluster.start_broker(0, wait=False, prepare=slow_sync)
    start_outcome: list[object] = []
    cluster.starts[0].addBoth(start_outcome.append)
    cluster.pump_until(lambda: broker.broker_epoch >= 0, what="the registration")
    assert not start_outcome
    stop_outcome: list[object] = []
    broker.shutdown().addBoth(stop_outcome.append)
    cluster.pump_until(lambda: bool(stop_outcome), what="the shutdown")
    gate.callback(None)                      # the sync's ZooKeeper reads come back late
    cluster.pump_until(lambda: bool(start_outcome), what="the start-up's end")
    assert not isinstance(stop_outcome[0], Failure), stop_outcome[0]
    assert isinstance(start_outcome[0], Failure) and start_outcome[0].check(StartupInterrupted), start_outcome[0]
    assert not any(loop.running for loop in broker.loops + broker.cleaner_loops)
    assert broker.fatal is None
