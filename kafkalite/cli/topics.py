"""kafkalite-topics: create, list, describe, alter and delete topics, like kafka-topics.sh.

With ``--bootstrap-server`` it goes through the protocol (CreateTopics, Metadata, ...); with
``--zookeeper`` it reads and writes Kafka's znodes directly, as the ZooKeeper-era tool did (the
controller then creates partition states and elects leaders).
"""
from __future__ import annotations

import re
import sys
from typing import Any, Mapping

from kafkalite.client import Admin, ClientError, NewTopic
from kafkalite.client.admin import TOPIC
from kafkalite.errors import ErrorCode

from .common import ToolError, bootstrap_arg, command_config, parser, properties, run, zookeeper_login


def build_parser():
    p = parser("kafkalite-topics", "Create, delete, describe, or change a topic.")
    bootstrap_arg(p, required=False)
    p.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="ZooKeeper connect string (ZooKeeper-era mode)")
    actions = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        actions.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic", help="topic name (a regular expression for --list/--describe/--delete/--alter)")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="broker_id_for_part1_replica1:broker_id_for_part1_replica2,...")
    p.add_argument("--config", action="append", metavar="NAME=VALUE", help="a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    return p


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            replicas = [int(b) for b in part.split(":")]
        except ValueError:
            raise ToolError(f"invalid --replica-assignment {text!r} (expected e.g. 1:2,2:3)") from None
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"Partition replica lists may not contain duplicate entries: {part}")
        out[i] = replicas
    if len({len(r) for r in out.values()}) > 1:
        raise ToolError("Partition 1 has different replication factor: " + text)
    return out


def matching(topics: list[str], pattern: str | None) -> list[str]:
    if pattern is None:
        return topics
    try:
        rx = re.compile(pattern)
    except re.error:
        return [t for t in topics if t == pattern]
    return [t for t in topics if rx.fullmatch(t)]


def check_args(a) -> None:
    if bool(a.bootstrap_server) == bool(a.zookeeper):
        raise ToolError("exactly one of --bootstrap-server or --zookeeper must be given")
    if (a.create or a.alter or a.delete) and not a.topic:
        raise ToolError("--topic is required with --create, --alter and --delete")
    if a.create and not a.replica_assignment:
        if a.partitions is not None and a.partitions < 1:
            raise ToolError(f"The partitions must be greater than 0 (got {a.partitions})")
        if a.replication_factor is not None and a.replication_factor < 1:
            raise ToolError(f"The replication factor must be greater than 0 (got {a.replication_factor})")
    if a.alter and a.partitions is None:
        raise ToolError("--alter needs --partitions (configs are changed with kafkalite-configs)")
    if a.alter and a.partitions is not None and a.partitions < 1:
        raise ToolError(f"The partitions must be greater than 0 (got {a.partitions})")


# -- output ------------------------------------------------------------------------------------
def topic_line(name: str, topic_id: str | None, count: int, rf: int, configs: Mapping[str, str | None]) -> str:
    cfg = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    tid = f"\tTopicId: {topic_id}" if topic_id else ""
    return f"Topic: {name}{tid}\tPartitionCount: {count}\tReplicationFactor: {rf}\tConfigs: {cfg}"


def partition_line(name: str, partition: int, leader: int, replicas: list[int], isr: list[int]) -> str:
    lead = str(leader) if leader >= 0 else "none"
    return (f"\tTopic: {name}\tPartition: {partition}\tLeader: {lead}\tReplicas: {','.join(map(str, replicas))}"
            f"\tIsr: {','.join(map(str, isr))}")


def describe_lines(name: str, topic_id: str | None, parts: dict[int, tuple[int, list[int], list[int]]],
                   configs: Mapping[str, str | None], live: set[int], a) -> list[str]:
    """Kafka's describe output for one topic; the filters print matching partitions only."""
    rows = []
    for p in sorted(parts):
        leader, replicas, isr = parts[p]
        if a.under_replicated_partitions and not len(isr) < len(replicas):
            continue
        if a.unavailable_partitions and not (leader < 0 or leader not in live):
            continue
        rows.append(partition_line(name, p, leader, replicas, isr))
    filtered = a.under_replicated_partitions or a.unavailable_partitions
    if a.topics_with_overrides and not configs:
        return []
    if filtered:
        return rows
    rf = len(parts[min(parts)][1]) if parts else 0
    return [topic_line(name, topic_id, len(parts), rf, configs)] + ([] if a.topics_with_overrides else rows)


# -- bootstrap mode -------------------------------------------------------------------------------
def with_admin(a) -> int:
    with Admin(a.bootstrap_server, **command_config(a, "kafkalite-topics")) as admin:
        if a.list:
            for t in matching(admin.list_topics(include_internal=not a.exclude_internal), a.topic):
                print(t)
            return 0
        if a.create:
            assignment = parse_replica_assignment(a.replica_assignment) if a.replica_assignment else None
            nt = NewTopic(a.topic, a.partitions if a.partitions is not None else -1,
                          a.replication_factor if a.replication_factor is not None else -1,
                          assignment, properties(a.config, "--config"))
            err = admin.create_topics([nt])[a.topic]
            if err is not None:
                if err.code == ErrorCode.TOPIC_ALREADY_EXISTS and a.if_not_exists:
                    return 0
                raise err
            print(f"Created topic {a.topic}.")
            return 0
        existing = admin.list_topics(include_internal=True)
        names = matching(existing, a.topic)
        if a.topic and not names and not a.if_exists:
            raise ToolError(f"Topic '{a.topic}' does not exist as expected")
        if a.describe:
            md = admin.client.metadata(names)
            live = set(md.brokers)
            for name in names:
                tm = md.topics.get(name)
                if tm is None or (a.exclude_internal and tm.internal):
                    continue
                configs = {k: e.value for k, e in admin.describe_configs(TOPIC, name).items()
                           if e.source == "DYNAMIC_TOPIC_CONFIG"}
                parts = {p: (pm.leader, pm.replicas, pm.isr) for p, pm in tm.partitions.items()}
                for line in describe_lines(name, None, parts, configs, live, a):
                    print(line)
            return 0
        if a.alter:
            for name in names:
                err = admin.create_partitions({name: a.partitions})[name]
                if err is not None:
                    raise err
            return 0
        if a.delete:
            for name, err in admin.delete_topics(names).items():
                if err is not None:
                    raise err
            return 0
    return 0


# -- ZooKeeper mode -------------------------------------------------------------------------------
def with_zookeeper(a) -> int:
    from twisted.internet import defer

    from kafkalite.config import ConfigError, validate_topic_overrides
    from kafkalite.controller.assignment import assign_replicas, new_partitions_assignment
    from kafkalite.coordination.kafka_zk_client import KafkaZkClient
    from kafkalite.coordination.ops import BadVersion
    from kafkalite.errors import KafkaError
    from zk_schema import TopicZNode

    result: dict[str, Any] = {"code": 0, "error": None}
    login = zookeeper_login()          # as Kafka's tools: a JAAS Client section means secure znodes

    @defer.inlineCallbacks
    def main(reactor: Any) -> Any:
        zk = KafkaZkClient(a.zookeeper, session_timeout_ms=10000, connect_timeout_ms=10000, reactor=reactor,
                           secure=login is not None, digest_auth=login)
        try:
            yield zk.start()
        except Exception as exc:  # noqa: BLE001 - reported as one line
            result["error"] = f"cannot connect to ZooKeeper at {a.zookeeper}: {exc}"
            return
        try:
            yield run_zk(zk)
        except (ToolError, KafkaError, ConfigError) as exc:
            result["error"] = str(exc)
        finally:
            yield zk.stop()

    @defer.inlineCallbacks
    def run_zk(zk: Any) -> Any:
        topics = yield zk.get_all_topics()
        deleting = set((yield zk.get_topics_marked_for_deletion()))
        if a.list:
            for t in matching(topics, a.topic):
                if a.exclude_internal and t.startswith("__"):
                    continue
                print(f"{t} - marked for deletion" if t in deleting else t)
            return
        if a.create:
            if a.topic in topics:
                if a.if_not_exists:
                    return
                raise ToolError(f"Topic '{a.topic}' already exists.")
            configs = validate_topic_overrides(properties(a.config, "--config"))
            live = yield zk.get_live_brokers()
            if a.replica_assignment:
                assignment = parse_replica_assignment(a.replica_assignment)
                unknown = sorted({b for r in assignment.values() for b in r} - set(live))
                if unknown:
                    raise ToolError(f"Unknown broker(s) in replica assignment: {','.join(map(str, unknown))}.")
            else:
                if a.partitions is None or a.replication_factor is None:
                    raise ToolError("--partitions and --replication-factor are required with --zookeeper --create")
                if a.replication_factor > len(live):
                    raise ToolError(f"Replication factor: {a.replication_factor} larger than available brokers: "
                                    f"{len(live)}.")
                assignment = assign_replicas(list(live), a.partitions, a.replication_factor)
            yield zk.create_topic(a.topic, assignment, configs)
            print(f"Created topic {a.topic}.")
            return
        names = matching(topics, a.topic)
        if a.topic and not names and not a.if_exists:
            raise ToolError(f"Topic '{a.topic}' does not exist as expected")
        if a.describe:
            live = set((yield zk.get_live_brokers()))
            for name in names:
                if a.exclude_internal and name.startswith("__"):
                    continue
                versioned = yield zk.get_topic_assignment(name)
                if versioned is None:
                    continue
                node = versioned.value
                configs = yield zk.get_topic_config(name)
                parts = {}
                for p, replicas in node.partitions.items():
                    st = yield zk.get_partition_state(name, p)
                    leader, isr = (st.leader, list(st.isr)) if st is not None else (-1, [])
                    parts[p] = (leader, list(replicas), isr)
                for line in describe_lines(name, node.topic_id, parts, configs, live, a):
                    print(line)
            return
        if a.alter:
            live = yield zk.get_live_brokers()
            for name in names:
                versioned = yield zk.get_topic_assignment(name)
                node = versioned.value
                added = new_partitions_assignment(list(live), node.partitions, a.partitions)
                merged = {**node.partitions, **{p: tuple(r) for p, r in added.items()}}
                # a reassignment in progress keeps its adding/removing fields (as Kafka's AdminZkClient)
                result = yield zk.set_topic_assignment(name, TopicZNode(merged, node.adding_replicas, node.removing_replicas,
                                                                        node.topic_id), versioned.version)
                if isinstance(result, BadVersion):
                    raise ToolError(f"the assignment of topic {name} changed meanwhile; try again")
            print("Adding partitions succeeded!")
            return
        if a.delete:
            for name in names:
                if name.startswith("__"):
                    raise ToolError(f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion.")
                yield zk.mark_topic_for_deletion(name)
                print(f"Topic {name} is marked for deletion.")
                print("Note: This will have no impact if delete.topic.enable is not set to true.")

    from twisted.internet import reactor as _reactor

    def start() -> None:
        d = main(_reactor)
        d.addErrback(lambda f: result.__setitem__("error", f.getErrorMessage()))
        d.addBoth(lambda _: _reactor.stop())
    _reactor.callWhenRunning(start)
    _reactor.run(installSignalHandlers=False)  # type: ignore[call-arg]  # stub: IReactorCore.run lacks ReactorBase's flag
    if result["error"]:
        raise ToolError(result["error"])
    return 0


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    check_args(a)
    return with_zookeeper(a) if a.zookeeper else with_admin(a)


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
