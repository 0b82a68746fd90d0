"""kafkalite-reassign-partitions: move partitions between brokers, like Kafka 2.8's
kafka-reassign-partitions.sh with ``--bootstrap-server`` (the KIP-455 APIs).

* ``--generate --topics-to-move-json-file F --broker-list 0,1,2``: prints the current assignment
  of those topics and a balanced proposal over the listed brokers (Kafka's replica placement,
  rack-aware when every broker has a rack and ``--disable-rack-aware`` is not given; each topic
  keeps its partition count and partition 0's replication factor). Nothing is changed.
* ``--execute --reassignment-json-file F``: prints the current assignment to save for a rollback,
  then starts the reassignments (AlterPartitionReassignments); refuses while other reassignments
  are in progress unless ``--additional``.
* ``--execute ... --throttle RATE``: first throttles the copy as Kafka 2.x's tool does: every
  moving partition's current replicas go into its topic's ``leader.replication.throttled.replicas``
  and its new replicas into ``follower.replication.throttled.replicas``, and every broker involved
  (old and new replicas) gets ``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` = RATE bytes/s (dynamic broker configs).
* ``--verify --reassignment-json-file F``: per partition, complete / still in progress / not
  reassigning but with another replica set; once every one is complete it removes the throttles
  (the rates from every broker, the replica lists from the plan's topics) unless
  ``--preserve-throttles``.
* ``--cancel --reassignment-json-file F``: cancels the listed partitions' reassignments
  (their original replicas are restored).
* ``--list``: the reassignments in progress.

JSON formats are Kafka's: ``{"version":1,"topics":[{"topic":"t"}]}`` for the topics to move;
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any",...]}]}``
for plans. A ``log_dirs`` entry other than "any" is the absolute log dir the replica on that broker
must live in: ``--execute`` sends AlterReplicaLogDirs to each such broker after starting the
reassignment (retrying while the replica does not exist yet, up to ``--timeout``), and
``--verify`` reports each such replica's move (DescribeLogDirs), as Kafka 2.8's tool does.
"""
from __future__ import annotations

import argparse
import json
import random
from typing import Any

from kafkalite.client import Admin, ClientError, KafkaClient
from kafkalite.client.admin import BROKER, DELETE, SET, TOPIC
from kafkalite.client.cluster import TopicPartition
from kafkalite.controller.assignment import assign_replicas, assign_replicas_for_brokers
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.quota.replication import format_throttled_replicas

from .common import ToolError, bootstrap_arg, command_config, parser, run

Plan = dict[TopicPartition, list[int]]


def build_parser():
    p = parser("kafkalite-reassign-partitions",
               "Generate, execute, verify, cancel or list partition reassignments.")
    bootstrap_arg(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose a reassignment (changes nothing)")
    actions.add_argument("--execute", action="store_true", help="start the reassignment in --reassignment-json-file")
    actions.add_argument("--verify", action="store_true", help="show the status of --reassignment-json-file")
    actions.add_argument("--cancel", action="store_true", help="cancel the reassignment in --reassignment-json-file")
    actions.add_argument("--list", action="store_true", help="list the reassignments in progress")
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='with --generate: {"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="0,1,2", help="with --generate: the brokers to spread replicas over")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    p.add_argument("--additional", action="store_true",
                   help="with --execute: start even though other reassignments are in progress")
    p.add_argument("--disable-rack-aware", action="store_true", help="with --generate: ignore broker racks")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: replication throttle for the moves (bytes/s); --verify removes it")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: throttle of moves between a broker's log dirs (bytes/s); --verify removes it")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: keep the throttles even when the reassignment is complete")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS", help="request timeout (default 10000)")
    return p


# -- JSON ------------------------------------------------------------------------------------------
def _load(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from None


def read_topics_to_move(path: str) -> list[str]:
    doc = _load(path)
    entries = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("topic"), str)
                                                for e in entries):
        raise ToolError(f'{path}: expected {{"version":1,"topics":[{{"topic":"t"}}, ...]}}')
    topics = list(dict.fromkeys(e["topic"] for e in entries))
    if not topics:
        raise ToolError(f"{path}: no topics listed")
    if len(topics) != len(entries):
        raise ToolError(f"Duplicate topic names in {path}")
    return topics


def read_plan(path: str) -> Plan:
    """Kafka's ``parsePartitionReassignmentData`` checks, as one-line errors."""
    doc = _load(path)
    if not isinstance(doc, dict) or doc.get("version", 1) != 1 or not isinstance(doc.get("partitions"), list):
        raise ToolError(f'{path}: expected {{"version":1,"partitions":[{{"topic":..,"partition":..,"replicas":[..]}}]}}')
    plan: Plan = {}
    for e in doc["partitions"]:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and isinstance(e.get("partition"), int)
                and isinstance(e.get("replicas"), list) and all(isinstance(r, int) for r in e["replicas"])):
            raise ToolError(f"{path}: invalid partition entry {json.dumps(e)}")
        tp = TopicPartition(e["topic"], e["partition"])
        if tp in plan:
            raise ToolError(f"Duplicate reassignment partitions: {tp.topic}-{tp.partition}")
        replicas = list(e["replicas"])
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"Duplicate replica assignment found: {tp.topic}-{tp.partition} {replicas}")
        if not replicas:
            raise ToolError(f"Partition {tp.topic}-{tp.partition} has an empty replica list")
        dirs = e.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise ToolError(f"Size of replicas list {replicas} is different from size of log dirs list "
                                f"{dirs} for partition {tp.topic}-{tp.partition}")
            if not all(isinstance(d, str) and (d == "any" or d.startswith("/")) for d in dirs):
                raise ToolError(f"{tp.topic}-{tp.partition}: each of log_dirs must be \"any\" or an absolute path")
        plan[tp] = replicas
    if not plan:
        raise ToolError("Partition reassignment list cannot be empty")
    return plan


Replica = tuple[TopicPartition, int]


def read_log_dirs(path: str) -> dict[Replica, str]:
    """(partition, broker) -> log dir for every ``log_dirs`` entry that is not "any" (after read_plan)."""
    out: dict[Replica, str] = {}
    for e in _load(path)["partitions"]:
        for broker, d in zip(e["replicas"], e.get("log_dirs") or []):
            if d != "any":
                out[(TopicPartition(e["topic"], e["partition"]), broker)] = d
    return out


def _replica_names(replicas: Any) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}-{b}" for tp, b in sorted(replicas))


def move_log_dirs(admin: Admin, moves: dict[Replica, str], timeout_ms: int) -> None:
    """Kafka 2.8's executeMoves: AlterReplicaLogDirs per broker until every replica accepted (a
    replica not created yet answers REPLICA_NOT_AVAILABLE: asked again until ``timeout_ms``)."""
    import time

    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000.0
    while pending:
        started: list[Replica] = []
        for broker in sorted({b for _, b in pending}):
            mine = {tp: d for (tp, b), d in pending.items() if b == broker}
            for tp, code in admin.alter_replica_log_dirs(broker, mine).items():
                if code == 0:
                    started.append((tp, broker))
                elif code != ErrorCode.REPLICA_NOT_AVAILABLE:
                    raise ToolError(f"Failed to move replica {tp.topic}-{tp.partition}-{broker} to "
                                    f"{mine[tp]}: {ErrorCode(code).name}")
        for replica in started:
            pending.pop(replica)
        if started:
            print(f"Successfully started log directory move{'s' if len(started) > 1 else ''} for: "
                  f"{_replica_names(started)}")
        if pending:
            if time.monotonic() > deadline:
                raise ToolError(f"Timed out before log directory moves could be started for: {_replica_names(pending)}")
            time.sleep(0.2)


def verify_log_dirs(admin: Admin, moves: dict[Replica, str]) -> bool:
    """Each replica's log dir move: done, in progress (a future replica there) or not started."""
    where: dict[Replica, tuple[str, bool]] = {}
    for broker in sorted({b for _, b in moves}):
        for d in admin.describe_log_dirs([broker]).get(broker, []):
            for r in d.replicas:
                key = (r.partition, broker)
                if r.is_future:
                    where[key] = (d.path, True)
                elif key not in where or not where[key][1]:
                    where.setdefault(key, (d.path, False))
    print("\nStatus of log directory movement:")
    done = True
    for (tp, b), wanted in sorted(moves.items()):
        name = f"{tp.topic}-{tp.partition}-{b}"
        path, future = where.get((tp, b), (None, False))
        if path == wanted and not future:
            print(f"Reassignment of replica {name} completed successfully.")
        elif future:
            print(f"Reassignment of replica {name} is still in progress.")
            done = False
        else:
            print(f"Partition {tp.topic}-{tp.partition} on broker {b} is not being moved from log dir {path} "
                  f"to {wanted}.")
            done = False
    return done


def plan_json(plan: Plan) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": r, "log_dirs": ["any"] * len(r)}
        for tp, r in sorted(plan.items())]}, separators=(",", ":"))


def _names(tps: Any) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


# -- actions -----------------------------------------------------------------------------------------
def current_assignment(client: KafkaClient, topics: list[str]) -> Plan:
    meta = client.metadata(topics)
    out: Plan = {}
    for name in topics:
        topic = meta.topics.get(name)
        if topic is None or topic.error or not topic.partitions:
            raise ToolError(f"Topic {name} not found")
        for p, part in topic.partitions.items():
            out[TopicPartition(name, p)] = list(part.replicas)
    return out


def generate(client: KafkaClient, topics: list[str], broker_list: list[int], rack_aware: bool,
             rng: random.Random | None = None) -> tuple[Plan, Plan]:
    """(current, proposed): Kafka's ``calculateAssignment`` (the replica placement of new topics,
    per topic with its partition count and partition 0's replication factor)."""
    meta = client.metadata(topics)
    missing = sorted(set(broker_list) - set(meta.brokers))
    if missing:
        raise ToolError(f"The following brokers in --broker-list are not known: {','.join(map(str, missing))}")
    current = current_assignment(client, topics)
    proposed: Plan = {}
    for name in topics:
        parts = {tp.partition: r for tp, r in current.items() if tp.topic == name}
        rf = len(parts[min(parts)])
        try:
            if rack_aware:
                racks = {b: meta.brokers[b][2] for b in broker_list}
                placed = assign_replicas_for_brokers(racks, len(parts), rf, rng=rng)
            else:
                placed = assign_replicas(broker_list, len(parts), rf, rng=rng)
        except KafkaError as exc:
            raise ToolError(f"topic {name}: {exc}") from None
        for p, replicas in placed.items():
            proposed[TopicPartition(name, p)] = replicas
    return current, proposed


LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def throttled_replicas(plan: Plan, current: Plan) -> dict[str, tuple[str, str]]:
    """Per topic, (leader list, follower list) for the partitions that move (Kafka's
    calculateLeaderThrottles / calculateFollowerThrottles: every current replica sends, every new
    one receives)."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for tp, target in plan.items():
        now = current[tp]
        if list(target) == list(now):
            continue
        leaders.setdefault(tp.topic, set()).update((tp.partition, b) for b in now)
        followers.setdefault(tp.topic, set()).update((tp.partition, b) for b in target if b not in now)
    return {t: (format_throttled_replicas(leaders[t]), format_throttled_replicas(followers.get(t, ())))
            for t in sorted(leaders)}


def set_throttles(admin: Admin, plan: Plan, current: Plan, rate: int, warn: bool = True) -> None:
    """The topic-level replica lists on the moving topics, the rates on every broker involved."""
    for topic, (leader, follower) in throttled_replicas(plan, current).items():
        admin.incremental_alter_configs(TOPIC, topic, [(LEADER_REPLICAS, SET, leader),
                                                       (FOLLOWER_REPLICAS, SET, follower)])
    brokers = sorted({b for tp in plan if plan[tp] != current[tp] for b in (*plan[tp], *current[tp])})
    for broker in brokers:
        admin.incremental_alter_configs(BROKER, str(broker), [(LEADER_RATE, SET, str(rate)),
                                                              (FOLLOWER_RATE, SET, str(rate))])
    if warn:
        print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(admin: Admin, topics: list[str]) -> None:
    """Kafka's clearAllThrottles: the rates from every broker of the cluster, the lists from the topics."""
    brokers = sorted(admin.client.metadata([]).brokers)
    for broker in brokers:
        admin.incremental_alter_configs(BROKER, str(broker), [
            (LEADER_RATE, DELETE, None), (FOLLOWER_RATE, DELETE, None), (LOG_DIRS_RATE, DELETE, None)])
    print(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} "
          f"{','.join(map(str, brokers))}")
    for topic in topics:
        admin.incremental_alter_configs(TOPIC, topic, [(LEADER_REPLICAS, DELETE, None), (FOLLOWER_REPLICAS, DELETE, None)])
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(topics)}")


def execute(admin: Admin, plan: Plan, additional: bool, timeout_ms: int, throttle: int = -1) -> None:
    if not additional and admin.list_partition_reassignments(timeout_ms=timeout_ms):
        raise ToolError("Cannot execute because there is an existing partition assignment. Use --additional to "
                        "override this and create a new partition assignment in addition to the existing one.")
    current = current_assignment(admin.client, sorted({tp.topic for tp in plan}))
    missing = [tp for tp in plan if tp not in current]
    if missing:
        raise ToolError(f"Unable to find partitions: {_names(missing)}")
    print("Current partition replica assignment\n")
    print(plan_json({tp: current[tp] for tp in plan}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        set_throttles(admin, plan, current, throttle)
    results = admin.alter_partition_reassignments(dict(plan), timeout_ms=timeout_ms)
    failed = {tp: err for tp, err in results.items() if err is not None}
    if failed:
        for tp, err in sorted(failed.items()):
            print(f"Error reassigning partition {tp.topic}-{tp.partition}: {err}")
        raise ToolError(f"Error reassigning partition(s): {_names(failed)}")
    print(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for {_names(plan)}")


def verify(admin: Admin, plan: Plan, timeout_ms: int) -> bool:
    """Prints each partition's status; True when every one is complete."""
    ongoing = admin.list_partition_reassignments(list(plan), timeout_ms=timeout_ms)
    current = current_assignment(admin.client, sorted({tp.topic for tp in plan}))
    print("Status of partition reassignment:")
    done = True
    for tp, target in sorted(plan.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
            done = False
        elif current.get(tp) == target:
            print(f"Reassignment of partition {name} is complete.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{current.get(tp)} rather than {target}.")
            done = False
    return done


def cancel(admin: Admin, plan: Plan, timeout_ms: int) -> None:
    results = admin.alter_partition_reassignments({tp: None for tp in plan}, timeout_ms=timeout_ms)
    failed = {tp: err for tp, err in results.items() if err is not None}
    cancelled = [tp for tp, err in results.items() if err is None]
    if cancelled:
        print(f"Successfully cancelled partition reassignment{'s' if len(cancelled) > 1 else ''} "
              f"for: {_names(cancelled)}")
    if failed:
        for tp, err in sorted(failed.items()):
            print(f"Error cancelling partition reassignment for {tp.topic}-{tp.partition}: {err}")
        raise ToolError(f"Error cancelling partition reassignment(s): {_names(failed)}")


def list_ongoing(admin: Admin, timeout_ms: int) -> None:
    ongoing = admin.list_partition_reassignments(timeout_ms=timeout_ms)
    if not ongoing:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for tp, r in sorted(ongoing.items()):
        print(f"{tp.topic}-{tp.partition}: replicas: {','.join(map(str, r.replicas))}. "
              f"adding: {','.join(map(str, r.adding))}. removing: {','.join(map(str, r.removing))}.")


def decommission_plan(current: Plan, broker: int, live: list[int]) -> Plan:
    """Every partition with a replica on ``broker`` gets it replaced by the live broker that holds
    the fewest replicas and none of this partition's (ties: the lowest id); the replica keeps its
    position, so a preferred leader on ``broker`` hands over to its replacement. Raises ToolError
    when some partition has no broker left to go to."""
    others = sorted(b for b in live if b != broker)
    load = {b: 0 for b in others}
    for replicas in current.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    plan: Plan = {}
    for tp, replicas in sorted(current.items()):
        if broker not in replicas:
            continue
        free = [b for b in others if b not in replicas]
        if not free:
            raise ToolError(f"cannot move {tp.topic}-{tp.partition} off broker {broker}: its replication factor is "
                            f"{len(replicas)} and only {len(others)} other broker(s) are live")
        target = min(free, key=lambda b: (load[b], b))
        load[target] += 1
        plan[tp] = [target if b == broker else b for b in replicas]
    return plan


def drain(admin: Admin, broker: int, timeout_s: float, throttle: int = -1,
          say: Any = print, poll_s: float = 0.5) -> Plan:
    """Move every replica off ``broker`` (AlterPartitionReassignments), throttled at ``throttle``
    bytes/s if >= 0, wait until every move is complete, then clear the throttles. Returns the plan."""
    import time

    meta = admin.client.metadata(None)
    if broker not in meta.brokers:
        raise ToolError(f"broker {broker} is not registered")
    topics = sorted(meta.topics)
    current = current_assignment(admin.client, topics) if topics else {}
    plan = decommission_plan(current, broker, sorted(meta.brokers))
    if not plan:
        say(f"broker {broker} holds no replicas")
        return plan
    if admin.list_partition_reassignments():
        raise ToolError("other reassignments are in progress: wait for them (kafkalite-reassign-partitions --list)")
    say(f"moving {len(plan)} replica(s) off broker {broker}: {_names(plan)}")
    if throttle >= 0:
        set_throttles(admin, plan, current, throttle, warn=False)     # cleared below, when done
    results = admin.alter_partition_reassignments(dict(plan))
    failed = {tp: err for tp, err in results.items() if err is not None}
    if failed:
        raise ToolError(f"could not start the reassignment of {_names(failed)}: {next(iter(failed.values()))}")
    deadline = time.monotonic() + timeout_s
    moved_topics = sorted({tp.topic for tp in plan})
    while True:
        ongoing = admin.list_partition_reassignments(list(plan))
        now = current_assignment(admin.client, moved_topics)
        if not ongoing and all(now.get(tp) == r for tp, r in plan.items()):
            break
        if time.monotonic() > deadline:
            raise ToolError(f"the reassignment off broker {broker} did not complete within {timeout_s:.0f} s "
                            f"(still moving: {_names(ongoing) or 'none'}); it goes on in the background")
        time.sleep(poll_s)
    if throttle >= 0:
        clear_throttles(admin, moved_topics)
    return plan


def _broker_list(raw: str | None) -> list[int]:
    if not raw:
        raise ToolError("--generate needs --broker-list")
    try:
        ids = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise ToolError(f"invalid --broker-list {raw!r} (expected ids like 0,1,2)") from None
    if len(set(ids)) != len(ids):
        raise ToolError("Duplicate broker ids in --broker-list")
    if not ids:
        raise ToolError("--broker-list is empty")
    return ids


def _admin(args: argparse.Namespace) -> Admin:
    """The tool's Admin: ``--command-config``'s settings, each request bounded by ``--timeout``."""
    return Admin(args.bootstrap_server, **{**command_config(args, "kafkalite-reassign-partitions"),
                                           "request_timeout_ms": args.timeout})


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.generate:
        if not args.topics_to_move_json_file:
            raise ToolError("--generate needs --topics-to-move-json-file")
        topics = read_topics_to_move(args.topics_to_move_json_file)
        brokers = _broker_list(args.broker_list)
        with _admin(args) as admin:
            current, proposed = generate(admin.client, topics, brokers, not args.disable_rack_aware)
        print(f"Current partition replica assignment\n{plan_json(current)}\n")
        print(f"Proposed partition reassignment configuration\n{plan_json(proposed)}")
        return 0
    if args.list:
        with _admin(args) as admin:
            list_ongoing(admin, args.timeout)
        return 0
    if not args.reassignment_json_file:
        raise ToolError("--execute, --verify and --cancel need --reassignment-json-file")
    plan = read_plan(args.reassignment_json_file)
    with _admin(args) as admin:
        moves = read_log_dirs(args.reassignment_json_file)
        if args.execute:
            execute(admin, plan, args.additional, args.timeout, args.throttle)
            if moves:
                if args.replica_alter_log_dirs_throttle >= 0:
                    for broker in sorted({b for _, b in moves}):
                        admin.incremental_alter_configs(BROKER, str(broker), [
                            (LOG_DIRS_RATE, SET, str(args.replica_alter_log_dirs_throttle))])
                    print(f"The replica-alter-dir throttle limit was set to "
                          f"{args.replica_alter_log_dirs_throttle} B/s")
                move_log_dirs(admin, moves, args.timeout)
        elif args.verify:
            complete = verify(admin, plan, args.timeout)
            if moves:
                complete = verify_log_dirs(admin, moves) and complete
            if complete and not args.preserve_throttles:
                clear_throttles(admin, sorted({tp.topic for tp in plan}))
        else:
            cancel(admin, plan, args.timeout)
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
