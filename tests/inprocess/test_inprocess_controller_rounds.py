"""The controller plans again only the partitions whose state changed.

Each partition's decision depends on its own state and on inputs (brokers, assignments,
shutdowns, failed log dirs) whose changes start a round over every partition. A state change
alone therefore re-plans its own partition: a failover writes thousands of states one watch at a
time, and a round over every partition for each made the controller's work grow with the square
of the partition count (30,000 partitions: 147 s until every leader had moved).
"""
from __future__ import annotations

from typing import Any

from kafkalite.controller import controller as controller_module
from kafkalite.controller import decisions

TOPIC = "rounds"
PARTITIONS = 60


def test_isr_expansions_after_a_broker_returns_re_plan_only_their_partitions(
        inprocess_cluster_factory, monkeypatch) -> None:
    cluster = inprocess_cluster_factory(3)
    # RF 2: the returning broker holds about two thirds of the partitions, so the ISR expansions
    # (delivered to the controller together, in one batch) are fewer than all partitions
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
    controller = cluster.controller().broker_id
    victim = next(b for b in sorted(cluster.brokers) if b != controller)
    led = [p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) == victim]
    assert led

    cluster.stop_broker(victim)
    cluster.pump_until(lambda: all(cluster.leader_of(TOPIC, p) != victim for p in range(PARTITIONS)),
                       what="every leader moved off the stopped broker")

    planned: list[int] = []
    real_plan = decisions.plan

    def counting_plan(live: Any, assignments: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append(sum(len(entries) for topic, entries in assignments.items() if topic == TOPIC))
        return real_plan(live, assignments, *args, **kwargs)
    monkeypatch.setattr(controller_module.decisions, "plan", counting_plan)

    # back: every leader adds it to its ISR, one state write each, which the controller sees
    cluster.start_broker(victim)
    cluster.pump_until(lambda: all(cluster.replicated(TOPIC, p) for p in range(PARTITIONS)),
                       what="every ISR full again")
    cluster.pump_until(lambda: not cluster.controller().controller.running, what="the controller idle")
    # one round over everything for the broker's return, then the changed partitions again: a
    # few times the partition count, where a round over every partition per state change
    # planned it once per change (about PARTITIONS * PARTITIONS)
    assert len(planned) >= 2, planned
    assert any(0 < n < PARTITIONS for n in planned), planned      # rounds over the changed ones only
    assert sum(planned) <= 4 * PARTITIONS, (sum(planned), len(planned), planned[:20])
