"""What the controller must write, given what ZooKeeper says: a pure reconciliation step.

The controller re-runs :func:`plan` after every change it watches (brokers, topics, partition
states, deletion requests). It returns ZooKeeper writes that bring the cluster to Kafka's rules:

* a partition without a state znode gets one: leader = first live replica in assignment order,
  ISR = all live replicas, leader_epoch 0 (``onNewPartitionCreation``);
* a partition whose leader is dead gets a new leader: the first replica in assignment order that
  is alive and in the ISR, ISR filtered to live brokers, leader_epoch + 1; with none and
  ``unclean.leader.election.enable`` the first live replica, ISR = [it]; otherwise it stays
  offline (``OfflinePartitionLeaderElectionStrategy``);
* a dead broker still in the ISR of a partition it does not lead is removed from the ISR
  (never below one member), leader_epoch + 1;
* a broker shutting down in a controlled way gives up its leaderships to the first replica in
  assignment order that is alive, in the ISR and not shutting down, and leaves every ISR
  (``ControlledShutdownLeaderElectionStrategy``; never unclean);
* a replica on a failed log dir (``offline_replicas``: (topic, partition, broker) triples, which
  the controller learns from the broker after its log-dir event) counts as dead for that partition
  only, as Kafka's ``onReplicasBecomeOffline`` does: a leader there is replaced from the rest of
  the ISR in assignment order (unclean only if the topic allows it), it leaves the ISR (never below
  one member), it is never elected, and its broker keeps its other partitions;
* a topic queued in ``/admin/delete_topics`` is removed.

:func:`elect_leaders` is ElectLeaders (API 43) and ``/admin/preferred_replica_election``: for the
requested partitions, a preferred election (leader = the first assigned replica, when alive, not
shutting down, online and in the ISR) or an unclean one (only for partitions without a live
leader: the first live in-sync replica, else the first live replica, ISR = it), with Kafka's
per-partition answers.

:func:`preferred_leader_actions` is the auto-rebalance step (``auto.leader.rebalance.enable``):
leadership goes back to the preferred (first assigned) replica when it is alive and in the ISR,
for brokers whose share of preferred partitions led by others exceeds
``leader.imbalance.per.broker.percentage``.

Because the step is a function of the current state, a controller that lost a race or restarted
simply runs it again; each write is conditional on the znode version it was computed from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Iterable, Mapping, NamedTuple, Sequence

from kafkalite.errors import ErrorCode
from kafkalite.metadata.state import LeaderAndIsr


@dataclass(frozen=True)
class CreateState:
    topic: str
    partition: int
    state: LeaderAndIsr


@dataclass(frozen=True)
class UpdateState:
    topic: str
    partition: int
    state: LeaderAndIsr
    expected_version: int
    reason: str


@dataclass(frozen=True)
class DeleteTopic:
    topic: str


@dataclass(frozen=True)
class CompleteReassignment:
    """Write the topic znode's entry for ``partition`` to ``replicas`` (= TRS), no adding/removing."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


Action = CreateState | UpdateState | DeleteTopic | CompleteReassignment

#: (topic, partition, broker id) of a replica whose log dir failed on that broker.
OfflineReplica = tuple[str, int, int]


def offline_by_partition(offline_replicas: Iterable[OfflineReplica]) -> dict[tuple[str, int], frozenset[int]]:
    """(topic, partition) -> the brokers whose replica of it is offline."""
    out: dict[tuple[str, int], set[int]] = {}
    for topic, partition, broker in offline_replicas:
        out.setdefault((topic, partition), set()).add(broker)
    return {k: frozenset(v) for k, v in out.items()}


def elect_leader(replicas: Sequence[int], isr: Sequence[int], live: AbstractSet[int], unclean: bool,
                 excluded: AbstractSet[int] = frozenset()) -> tuple[int, tuple[int, ...]] | None:
    """(leader, isr) by Kafka's offline-partition election, or None when no replica qualifies."""
    live_isr = [r for r in isr if r in live]
    for r in replicas:
        if r in live and r in isr and r not in excluded:
            return r, tuple(i for i in live_isr if i not in excluded or i == r)
    if unclean:
        for r in replicas:
            if r in live and r not in excluded:
                return r, (r,)
    return None


def plan(live_brokers: Iterable[int],
         assignments: Mapping[str, Mapping[int, Sequence[int]]],
         states: Mapping[tuple[str, int], LeaderAndIsr],
         deleting: Iterable[str],
         controller_epoch: int,
         unclean: Callable[[str], bool] = lambda topic: False,
         shutting_down: Iterable[int] = (),
         offline_replicas: Iterable[OfflineReplica] = ()) -> list[Action]:
    alive = set(live_brokers)
    leaving = set(shutting_down)
    offline = offline_by_partition(offline_replicas)
    actions: list[Action] = []
    doomed = set(deleting)
    for topic in sorted(doomed):
        actions.append(DeleteTopic(topic))
    for topic in sorted(assignments):
        if topic in doomed:
            continue
        for p, replicas in sorted(assignments[topic].items()):
            state = states.get((topic, p))
            # the replicas that can serve this partition: live brokers, minus failed log dirs
            gone = offline.get((topic, p))
            live = alive - gone if gone else alive
            if state is None:
                serving = [r for r in replicas if r in live]
                if serving:  # with no live replica the partition waits (Kafka's NewPartition)
                    actions.append(CreateState(topic, p, LeaderAndIsr(serving[0], 0, tuple(serving), controller_epoch)))
                continue
            leader_gone = state.leader not in live or state.leader in leaving
            if leader_gone:
                # A controlled shutdown never elects an out-of-sync replica: the leader is alive.
                allow_unclean = state.leader not in live and unclean(topic)
                choice = elect_leader(replicas, state.isr, live, allow_unclean, leaving)
                if choice is None:
                    if state.leader != -1 and state.leader not in live:
                        actions.append(UpdateState(topic, p, LeaderAndIsr(-1, state.leader_epoch + 1, state.isr,
                                                                   controller_epoch), state.zk_version,
                                                   f"no live in-sync replica of {replicas}"))
                    continue
                leader, isr = choice
                if (leader, isr) != (state.leader, state.isr):
                    why = (f"leader {state.leader}'s log dir is offline" if gone and state.leader in gone
                           else f"leader {state.leader} unavailable")
                    actions.append(UpdateState(topic, p, LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch),
                                               state.zk_version, why))
                continue
            dead_in_isr = [r for r in state.isr if r not in live or (r in leaving and r != state.leader)]
            if dead_in_isr:
                isr = tuple(r for r in state.isr if r not in dead_in_isr) or (state.leader,)
                if isr != state.isr:
                    actions.append(UpdateState(topic, p, LeaderAndIsr(state.leader, state.leader_epoch + 1, isr,
                                                               controller_epoch), state.zk_version,
                                               f"replicas {dead_in_isr} left the ISR"))
    return actions


def preferred_leader_actions(live_brokers: Iterable[int],
                             assignments: Mapping[str, Mapping[int, Sequence[int]]],
                             states: Mapping[tuple[str, int], LeaderAndIsr],
                             deleting: Iterable[str],
                             controller_epoch: int,
                             shutting_down: Iterable[int] = (),
                             imbalance_percentage: int = 10,
                             skip: Iterable[tuple[str, int]] = (),
                             offline_replicas: Iterable[OfflineReplica] = ()) -> list[UpdateState]:
    """Kafka's ``checkAndTriggerAutoLeaderRebalance``: per preferred broker, if the share of its
    preferred partitions led by someone else exceeds ``imbalance_percentage``, elect it for those
    where it is alive (and not shutting down), its replica is online and it is in the ISR; ISR
    unchanged, leader_epoch + 1."""
    live = set(live_brokers) - set(shutting_down)
    offline = set(offline_replicas)
    doomed, skipped = set(deleting), set(skip)
    by_preferred: dict[int, list[tuple[str, int]]] = {}
    for topic in sorted(assignments):
        if topic in doomed:
            continue
        for p, replicas in sorted(assignments[topic].items()):
            if replicas:
                by_preferred.setdefault(replicas[0], []).append((topic, p))
    actions: list[UpdateState] = []
    for broker, keys in sorted(by_preferred.items()):
        elsewhere = [k for k in keys if k in states and states[k].leader != broker]
        if len(elsewhere) / len(keys) <= imbalance_percentage / 100.0 or broker not in live:
            continue
        for key in elsewhere:
            state = states[key]
            if key in skipped or broker not in state.isr or (key[0], key[1], broker) in offline:
                continue
            actions.append(UpdateState(key[0], key[1], LeaderAndIsr(broker, state.leader_epoch + 1, state.isr,
                                                             controller_epoch), state.zk_version,
                                       f"preferred replica {broker} is back in the ISR"))
    return actions


#: ElectLeaders' election types (Kafka's ``ElectionType``).
PREFERRED, UNCLEAN = 0, 1

class ElectionResult(NamedTuple):
    """A partition's answer to a requested election."""

    code: ErrorCode
    message: str | None
    leader: int          #: the leader to expect when the code is NONE (-1 otherwise)


def elect_leaders(election_type: int,
                  partitions: Iterable[tuple[str, int]],
                  live_brokers: Iterable[int],
                  assignments: Mapping[str, Mapping[int, Sequence[int]]],
                  states: Mapping[tuple[str, int], LeaderAndIsr],
                  deleting: Iterable[str],
                  controller_epoch: int,
                  shutting_down: Iterable[int] = (),
                  offline_replicas: Iterable[OfflineReplica] = ()
                  ) -> tuple[list[UpdateState], dict[tuple[str, int], ElectionResult]]:
    """Kafka's ``KafkaController.processReplicaLeaderElection`` for ``partitions``: the writes,
    and each partition's answer (NONE for those written, once the write succeeds).

    Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, those of a topic being deleted
    INVALID_TOPIC_EXCEPTION; a partition whose leader is already right (the preferred replica;
    for an unclean election, any live leader) ELECTION_NOT_NEEDED; one with no replica that
    qualifies PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE. The ISR stays as
    it is for a preferred election; leader_epoch + 1."""
    alive = set(live_brokers)
    leaving = set(shutting_down)
    offline = offline_by_partition(offline_replicas)
    doomed = set(deleting)
    actions: list[UpdateState] = []
    results: dict[tuple[str, int], ElectionResult] = {}
    strategy = ("PreferredReplicaPartitionLeaderElectionStrategy" if election_type == PREFERRED
                else "OfflinePartitionLeaderElectionStrategy(allowUnclean=true)")
    for topic, p in partitions:
        key = (topic, p)
        if key in results:
            continue
        replicas = assignments.get(topic, {}).get(p)
        if replicas is None:
            results[key] = ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1)
            continue
        if topic in doomed:
            results[key] = ElectionResult(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted", -1)
            continue
        state = states.get(key)
        gone = offline.get(key)
        live = alive - gone if gone else alive
        failed = ElectionResult(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED
                                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                f"Failed to elect leader for partition {topic}-{p} under strategy {strategy}", -1)
        if state is None:
            results[key] = failed            # not created yet: the controller's next round does it
            continue
        if election_type == PREFERRED:
            preferred = replicas[0] if replicas else -1
            if state.leader == preferred:
                results[key] = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, None, state.leader)
            elif preferred in live and preferred not in leaving and preferred in state.isr:
                actions.append(UpdateState(topic, p, LeaderAndIsr(preferred, state.leader_epoch + 1, state.isr,
                                                                  controller_epoch), state.zk_version,
                                           f"preferred leader election of replica {preferred}"))
                results[key] = ElectionResult(ErrorCode.NONE, None, preferred)
            else:
                results[key] = failed
            continue
        if state.leader >= 0 and state.leader in live:
            results[key] = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, None, state.leader)
            continue
        choice = elect_leader(replicas, state.isr, live, True, leaving)
        if choice is None:
            results[key] = failed
            continue
        leader, isr = choice
        clean = leader in state.isr
        actions.append(UpdateState(topic, p, LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch),
                                   state.zk_version, "requested election" + ("" if clean else " (unclean)")))
        results[key] = ElectionResult(ErrorCode.NONE, None, leader)
    return actions, results


# -- partition reassignment (KIP-455 on the ZooKeeper data model) ---------------------------------

@dataclass(frozen=True)
class PartitionAssignment:
    """One partition's entry in the topic znode: the full replica set RS (during a reassignment
    ORS + TRS, target first), and the replicas being added (TRS - ORS) and removed (ORS - TRS)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: RS without the replicas being removed (Kafka's ``targetReplicas``)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: RS without the replicas being added (Kafka's ``originReplicas``)."""
        return tuple(r for r in self.replicas if r not in self.adding)


def start_reassignment(current: PartitionAssignment, target: Sequence[int] | None) -> PartitionAssignment:
    """Kafka's ``ReplicaAssignment.reassignTo`` (and cancellation for ``target`` None): the topic
    znode entry to write. A new target replaces one in progress, computed from the original
    replicas; a target equal to them (or None) cancels, restoring ORS. Raises ValueError for an
    invalid target (empty, duplicates, negative ids)."""
    origin = current.origin
    if target is None:
        return PartitionAssignment(origin)
    trs = tuple(int(r) for r in target)
    if not trs or len(set(trs)) != len(trs) or any(r < 0 for r in trs):
        raise ValueError(f"invalid replica assignment {list(trs)}")
    if trs == origin:
        return PartitionAssignment(origin)
    rs = tuple(dict.fromkeys(trs + origin))
    return PartitionAssignment(rs, tuple(r for r in trs if r not in origin),
                               tuple(r for r in origin if r not in trs))


def reassignment_actions(live_brokers: Iterable[int],
                         assignments: Mapping[str, Mapping[int, PartitionAssignment]],
                         states: Mapping[tuple[str, int], LeaderAndIsr],
                         deleting: Iterable[str],
                         controller_epoch: int,
                         shutting_down: Iterable[int] = ()) -> list[UpdateState | CompleteReassignment]:
    """The next step of every reassignment in progress (Kafka's ``onPartitionReassignment``, phase
    B): once every target replica is in the ISR, a leader that is not a live target replica hands
    leadership to the first target replica that is alive and in the ISR, and the removed replicas
    leave the ISR (one state write, leader_epoch + 1); once the state shows leader and ISR within
    TRS, the assignment becomes TRS. Until every target replica is in the ISR nothing is written:
    the new replicas are created by their brokers (they see RS) and join the ISR through the
    leader as followers that caught up."""
    alive = set(live_brokers) - set(shutting_down)
    doomed = set(deleting)
    out: list[UpdateState | CompleteReassignment] = []
    for topic in sorted(assignments):
        if topic in doomed:
            continue
        for p, entry in sorted(assignments[topic].items()):
            state = states.get((topic, p))
            if not entry.reassigning:
                # after a cancellation (or a completion) replicas outside the assignment leave the
                # ISR, and a leader outside it hands over (Kafka stops those replicas)
                if state is None or state.leader < 0:
                    continue
                stray = [r for r in state.isr if r not in entry.replicas]
                if not stray and state.leader in entry.replicas:
                    continue
                isr = tuple(r for r in state.isr if r in entry.replicas)
                leader = state.leader
                if leader not in entry.replicas:
                    candidates = [r for r in entry.replicas if r in alive and r in isr]
                    if not candidates:
                        continue
                    leader = candidates[0]
                out.append(UpdateState(topic, p, LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch),
                                       state.zk_version, f"replicas {stray} are no longer assigned"))
                continue
            trs = entry.target
            if state is None or state.leader < 0 or not set(trs) <= set(state.isr):
                continue
            leader_ok = state.leader in trs and state.leader in alive
            isr = tuple(r for r in state.isr if r in trs)
            if leader_ok and isr == state.isr:
                out.append(CompleteReassignment(topic, p, trs))
                continue
            leader = state.leader
            if not leader_ok:
                candidates = [r for r in trs if r in alive and r in state.isr]
                if not candidates:
                    continue        # waits for a target replica to come back
                leader = candidates[0]
            out.append(UpdateState(topic, p, LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch),
                                   state.zk_version,
                                   f"reassignment to {list(trs)}: replicas {list(entry.removing)} leave"))
    return out
