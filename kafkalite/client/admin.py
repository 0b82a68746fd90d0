"""Admin: topics, partitions, configs, groups and group offsets, as Kafka's AdminClient does them.

Topic changes go to the controller (followed on NOT_CONTROLLER), group calls to the group's
coordinator, ListGroups to every broker (each lists only the groups it coordinates).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping, NamedTuple, Sequence

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, Operation, PatternType,
                                    Permission, ResourcePattern, ResourceType)

from .cluster import ClusterMetadata, TopicPartition
from .core import KafkaClient
from .errors import ClientError, check
from .security import ClientSecurity

log = logging.getLogger(__name__)

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2        # DescribeClientQuotas' MatchType
PREFERRED, UNCLEAN = 0, 1      # ElectLeaders' ElectionType

TOPIC, BROKER = 2, 4           # ConfigResource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3    # IncrementalAlterConfigs operations

CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1                  # -1: broker's num.partitions (CreateTopics v4)
    replication_factor: int = -1              # -1: broker's default.replication.factor
    replica_assignment: dict[int, list[int]] | None = None
    configs: dict[str, str] = field(default_factory=dict)


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]


class MemberDescription(NamedTuple):
    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]


class ReplicaInfo(NamedTuple):
    """One replica in a log dir (DescribeLogDirs): its size in bytes (the segments' log files),
    how far its log end is behind the high watermark, and whether it is a future replica (being
    moved into this dir by AlterReplicaLogDirs)."""
    partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(NamedTuple):
    path: str
    error_code: int            # 0, or KAFKA_STORAGE_ERROR for an offline dir
    replicas: list[ReplicaInfo]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int


class PartitionReassignment(NamedTuple):
    """A reassignment in progress: the full replica set and the replicas being added/removed."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]


class Admin:
    def __init__(self, bootstrap_servers: str | list[str] | None = None, *, client: KafkaClient | None = None,
                 request_timeout_ms: int = 30000, client_id: str = "kafkalite-admin",
                 security: ClientSecurity | None = None, retry_backoff_ms: int = 100, retries: int = 5,
                 connect_timeout_ms: int = 10000) -> None:
        """``security`` (TLS, SASL) and the retry settings are used when the Admin makes its own
        KafkaClient."""
        self._own = client is None
        self.client = client or KafkaClient(bootstrap_servers, client_id=client_id,
                                            request_timeout_ms=request_timeout_ms, security=security,
                                            retry_backoff_ms=retry_backoff_ms, retries=retries,
                                            connect_timeout_ms=connect_timeout_ms)
        self.timeout_ms = request_timeout_ms

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- topics -----------------------------------------------------------------------------
    def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                      timeout_ms: int | None = None) -> dict[str, ClientError | None]:
        """Per topic: None on success, else the ClientError (TOPIC_ALREADY_EXISTS, INVALID_...)."""
        body: dict[str, Any] = {"topics": [{
            "name": t.name,
            "num_partitions": -1 if t.replica_assignment else t.num_partitions,
            "replication_factor": -1 if t.replica_assignment else t.replication_factor,
            "assignments": [{"partition_index": p, "broker_ids": list(b)}
                            for p, b in sorted((t.replica_assignment or {}).items())],
            "configs": [{"name": k, "value": v} for k, v in t.configs.items()]} for t in topics],
            "timeout_ms": self.timeout_ms if timeout_ms is None else timeout_ms, "validate_only": validate_only}
        resp = self.client.send_to_controller(ApiKey.CREATE_TOPICS, body, _first_error("topics"), "CreateTopics",
                                              timeout=body["timeout_ms"] / 1000.0)
        return {t["name"]: _result(t, f"topic {t['name']!r}") for t in resp["topics"]}

    def delete_topics(self, names: list[str], *, timeout_ms: int | None = None) -> dict[str, ClientError | None]:
        body: dict[str, Any] = {"topic_names": list(names), "timeout_ms": self.timeout_ms if timeout_ms is None else timeout_ms}
        resp = self.client.send_to_controller(ApiKey.DELETE_TOPICS, body, _first_error("responses"), "DeleteTopics",
                                              timeout=body["timeout_ms"] / 1000.0)
        return {t["name"]: _result(t, f"topic {t['name']!r}") for t in resp["responses"]}

    def create_partitions(self, new_totals: dict[str, int], *, assignments: dict[str, list[list[int]]] | None = None,
                          validate_only: bool = False, timeout_ms: int | None = None) -> dict[str, ClientError | None]:
        body: dict[str, Any] = {"topics": [{"name": n, "count": c,
                            "assignments": None if not assignments or n not in assignments
                            else [{"broker_ids": b} for b in assignments[n]]} for n, c in new_totals.items()],
                "timeout_ms": self.timeout_ms if timeout_ms is None else timeout_ms, "validate_only": validate_only}
        resp = self.client.send_to_controller(ApiKey.CREATE_PARTITIONS, body, _first_error("results"), "CreatePartitions",
                                              timeout=body["timeout_ms"] / 1000.0)
        return {t["name"]: _result(t, f"topic {t['name']!r}") for t in resp["results"]}

    def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None, *,
                      timeout_ms: int | None = None) -> dict[TopicPartition, ClientError | None]:
        """ElectLeaders on the controller: ``partitions`` None means every partition (the answer
        then lists only those an election was needed for). Each partition's outcome: None when
        elected, else the error (ELECTION_NOT_NEEDED among them, as Kafka's AdminClient reports)."""
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {"election_type": election_type, "timeout_ms": timeout_ms,
                "topic_partitions": None if partitions is None
                else [{"topic": t, "partition_id": ps} for t, ps in by_topic.items()]}

        def error_of(resp: dict) -> int:
            if resp.get("error_code"):
                return int(resp["error_code"])
            codes = {p["error_code"] for r in resp["replica_election_results"] for p in r["partition_result"]}
            return ErrorCode.NOT_CONTROLLER if ErrorCode.NOT_CONTROLLER in codes else 0

        resp = self.client.send_to_controller(ApiKey.ELECT_LEADERS, body, error_of, "ElectLeaders", timeout=timeout_ms / 1000.0)
        check(resp.get("error_code", 0), "ElectLeaders")
        out: dict[TopicPartition, ClientError | None] = {}
        for r in resp["replica_election_results"]:
            for p in r["partition_result"]:
                tp = TopicPartition(r["topic"], p["partition_id"])
                out[tp] = (None if p["error_code"] == 0 else
                           ClientError.from_code(p["error_code"], f"{tp.topic}-{tp.partition}", p["error_message"]))
        return out

    # -- partition reassignment (KIP-455) ----------------------------------------------------------
    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None], *,
                                      timeout_ms: int | None = None) -> dict[TopicPartition, ClientError | None]:
        """AlterPartitionReassignments on the controller: start (a replica list) or cancel (None)
        each partition's reassignment; per partition None when accepted, else its error."""
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = self.client.send_to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, lambda r: int(r["error_code"]),
                                              "AlterPartitionReassignments", timeout=timeout_ms / 1000.0)
        check(resp["error_code"], "AlterPartitionReassignments")
        out: dict[TopicPartition, ClientError | None] = {}
        for t in resp["responses"]:
            for p in t["partitions"]:
                out[TopicPartition(t["name"], p["partition_index"])] = _result(p, f"{t['name']}-{p['partition_index']}")
        return out

    def list_partition_reassignments(self, partitions: Sequence[TopicPartition] | None = None, *,
                                     timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """ListPartitionReassignments on the controller: the reassignments in progress (of
        ``partitions``, or all)."""
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = self.client.send_to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": timeout_ms, "topics": topics},
                                              lambda r: int(r["error_code"]), "ListPartitionReassignments",
                                              timeout=timeout_ms / 1000.0)
        check(resp["error_code"], "ListPartitionReassignments")
        return {TopicPartition(t["name"], p["partition_index"]):
                PartitionReassignment(list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"]))
                for t in resp["topics"] for p in t["partitions"]}

    def delete_records(self, offsets: dict[TopicPartition, int], *, timeout_ms: int | None = None
                       ) -> dict[TopicPartition, int | ClientError]:
        """DeleteRecords on each partition's leader: records before the offset (-1: the high
        watermark) go. Per partition: the low watermark reached, or the (non-retriable) error."""
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        done: dict[TopicPartition, int | ClientError] = {}
        todo = dict(offsets)
        client = self.client

        def attempt() -> dict[TopicPartition, int | ClientError]:
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in list(todo):
                try:
                    by_node.setdefault(client.leader_for(tp), []).append(tp)
                except ClientError as exc:
                    if not exc.retriable:
                        done[tp] = exc
                        del todo[tp]
                        continue
                    raise
            retry: ClientError | None = None
            for node, tps in by_node.items():
                topics: dict[str, list[dict[str, int]]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": todo[tp]})
                body = {"topics": [{"name": n, "partitions": ps} for n, ps in topics.items()], "timeout_ms": timeout_ms}
                resp = client.send(node, ApiKey.DELETE_RECORDS, body, timeout=timeout_ms / 1000.0 + client.request_timeout)
                for t in resp["topics"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition_index"])
                        if p["error_code"]:
                            refused = ClientError.from_code(p["error_code"], f"DeleteRecords {tp.topic}-{tp.partition}")
                            if refused.retriable and refused.code != ErrorCode.REQUEST_TIMED_OUT:
                                retry = refused
                                continue
                            done[tp] = refused
                        else:
                            done[tp] = p["low_watermark"]
                        todo.pop(tp, None)
            if todo:
                raise retry or ClientError(f"DeleteRecords: no answer for {sorted(todo)}", ErrorCode.UNKNOWN_SERVER_ERROR)
            return done

        return client._with_retries(attempt, "DeleteRecords") if todo else done

    def describe_log_dirs(self, broker_ids: Sequence[int] | None = None,
                          topics: Sequence[str] | None = None, *,
                          metadata: ClusterMetadata | None = None) -> dict[int, list[LogDirDescription]]:
        """DescribeLogDirs on each broker (None: every broker in the metadata): per broker its log
        dirs, each with its error (KAFKA_STORAGE_ERROR for an offline dir) and the replicas it holds.
        ``topics`` narrows the answer to every partition of those topics (an unknown topic simply
        has none, as in Kafka). A caller that already holds a Metadata answer covering ``topics``
        passes it as ``metadata`` (the console's topics page: one Metadata request per view)."""
        md = metadata if metadata is not None else self.client.metadata(list(topics) if topics else None)
        if broker_ids is None:
            broker_ids = sorted(md.brokers)
        unknown = [b for b in broker_ids if b not in md.brokers]
        if unknown:
            raise ClientError(f"broker(s) {', '.join(map(str, unknown))} not in the cluster "
                              f"(brokers: {', '.join(map(str, sorted(md.brokers)))})", ErrorCode.BROKER_NOT_AVAILABLE)
        wanted: list[dict[str, Any]] | None = None
        if topics is not None:
            wanted = [{"topic": t, "partition_index": sorted(md.topics[t].partitions) if t in md.topics else []}
                      for t in topics]
        out: dict[int, list[LogDirDescription]] = {}
        for broker in broker_ids:
            resp = self.client._with_retries(
                partial(self.client.send, broker, ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted}), "DescribeLogDirs")
            check(resp.get("error_code", 0), f"DescribeLogDirs on broker {broker}")
            out[broker] = [LogDirDescription(
                r["log_dir"], r["error_code"],
                [ReplicaInfo(TopicPartition(t["name"], p["partition_index"]), p["partition_size"],
                             p["offset_lag"], p["is_future_key"])
                 for t in r["topics"] for p in t["partitions"]]) for r in resp["results"]]
        return out

    def alter_replica_log_dirs(self, broker: int, moves: Mapping[TopicPartition, str]) -> dict[TopicPartition, int]:
        """AlterReplicaLogDirs on ``broker``: move each replica to the given log dir; the error
        code per partition (REPLICA_NOT_AVAILABLE: the replica is not there yet, it will be
        created in that dir)."""
        by_dir: dict[str, dict[str, list[int]]] = {}
        for tp, d in moves.items():
            by_dir.setdefault(d, {}).setdefault(tp.topic, []).append(tp.partition)
        body = {"dirs": [{"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                         for d, topics in by_dir.items()]}
        resp = self.client._with_retries(
            partial(self.client.send, broker, ApiKey.ALTER_REPLICA_LOG_DIRS, body), "AlterReplicaLogDirs")
        return {TopicPartition(t["topic_name"], p["partition_index"]): p["error_code"]
                for t in resp["results"] for p in t["partitions"]}

    # -- client quotas -----------------------------------------------------------------------
    def describe_client_quotas(self, components: Sequence[tuple[str, int, str | None]], strict: bool = False
                               ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """DescribeClientQuotas: ``components`` are (entity type ``user``/``client-id``, match
        type, name); per matching entity its parts ({type: name, None = the default}) and quotas."""
        body = {"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
                "strict": strict}
        resp = self.client._with_retries(partial(self.client.send, None, ApiKey.DESCRIBE_CLIENT_QUOTAS, body),
                                         "DescribeClientQuotas")
        check(resp["error_code"], "DescribeClientQuotas", resp.get("error_message"))
        return [({e["entity_type"]: e["entity_name"] for e in entry["entity"]},
                 {v["key"]: v["value"] for v in entry["values"]}) for entry in resp["entries"] or ()]

    def alter_client_quotas(self, entity: Mapping[str, str | None], ops: Mapping[str, float | None], *,
                            validate_only: bool = False) -> None:
        """AlterClientQuotas for one entity ({type: name, None = the default}): each key set to
        its value, or removed for None."""
        body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                             "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                     for k, v in ops.items()]}],
                "validate_only": validate_only}
        resp = self.client._with_retries(partial(self.client.send, None, ApiKey.ALTER_CLIENT_QUOTAS, body),
                                         "AlterClientQuotas")
        for entry in resp["entries"]:
            check(entry["error_code"], "AlterClientQuotas", entry.get("error_message"))

    # -- ACLs -------------------------------------------------------------------------------
    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the bindings matching ``flt`` (SECURITY_DISABLED without an authorizer)."""
        resp = self.client._with_retries(partial(self.client.send, None, ApiKey.DESCRIBE_ACLS, _acl_filter_body(flt)),
                                         "DescribeAcls")
        check(resp["error_code"], "DescribeAcls", resp.get("error_message"))
        return [AclBinding(ResourcePattern(ResourceType(r["resource_type"]), r["resource_name"],
                                           PatternType(r.get("pattern_type", PatternType.LITERAL))),
                           AccessControlEntry(a["principal"], a["host"], Operation(a["operation"]),
                                              Permission(a["permission_type"])))
                for r in resp["resources"] for a in r["acls"]]

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """CreateAcls; the first refused binding's error is raised."""
        body = {"creations": [{"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
                               "resource_pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal,
                               "host": b.entry.host, "operation": int(b.entry.operation),
                               "permission_type": int(b.entry.permission)} for b in bindings]}
        resp = self.client._with_retries(partial(self.client.send, None, ApiKey.CREATE_ACLS, body), "CreateAcls")
        for result in resp["results"]:
            check(result["error_code"], "CreateAcls", result.get("error_message"))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> int:
        """DeleteAcls: the number of bindings deleted; the first error is raised."""
        resp = self.client._with_retries(partial(self.client.send, None, ApiKey.DELETE_ACLS,
                                                 {"filters": [_acl_filter_body(f) for f in filters]}), "DeleteAcls")
        deleted = 0
        for result in resp["filter_results"]:
            check(result["error_code"], "DeleteAcls", result.get("error_message"))
            for m in result["matching_acls"]:
                check(m["error_code"], "DeleteAcls", m.get("error_message"))
                deleted += 1
        return deleted

    def list_topics(self, include_internal: bool = False) -> list[str]:
        md = self.client.metadata(None)
        return sorted(n for n, t in md.topics.items() if include_internal or not t.internal)

    # -- configs ----------------------------------------------------------------------------
    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None
                         ) -> dict[str, ConfigEntry]:
        """All (or ``keys``) configs of a topic or broker with their sources and synonyms."""
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
                "include_synonyms": True, "include_documentation": False}
        node = int(name) if resource_type == BROKER and name else None
        resp = self.client._with_retries(lambda: self.client.send(node, ApiKey.DESCRIBE_CONFIGS, body), "DescribeConfigs")
        res = resp["results"][0]
        check(res["error_code"], f"DescribeConfigs {_kind(resource_type)} {name!r}", res.get("error_message"))
        return {c["name"]: ConfigEntry(c["name"], c["value"], CONFIG_SOURCES.get(c["config_source"], "UNKNOWN"),
                                       c["read_only"], c["is_sensitive"],
                                       [(s["name"], s["value"], CONFIG_SOURCES.get(s["source"], "UNKNOWN"))
                                        for s in c.get("synonyms") or []])
                for c in res["configs"]}

    def incremental_alter_configs(self, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]],
                                  *, validate_only: bool = False) -> None:
        """Apply (key, SET/DELETE/APPEND/SUBTRACT, value) operations (IncrementalAlterConfigs)."""
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
                "validate_only": validate_only}
        self._alter(ApiKey.INCREMENTAL_ALTER_CONFIGS, resource_type, name, body)

    def alter_configs(self, resource_type: int, name: str, configs: Mapping[str, str | None], *,
                      validate_only: bool = False) -> None:
        """Replace the whole set of dynamic configs of the resource (legacy AlterConfigs; values are nullable)."""
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "validate_only": validate_only}
        self._alter(ApiKey.ALTER_CONFIGS, resource_type, name, body)

    def _alter(self, api_key: ApiKey, resource_type: int, name: str, body: dict) -> None:
        node = int(name) if resource_type == BROKER and name else None
        what = f"{'IncrementalAlterConfigs' if api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS else 'AlterConfigs'}"
        resp = self.client._with_retries(lambda: self.client.send(node, api_key, body), what)
        res = resp["responses"][0]
        check(res["error_code"], f"{what} {_kind(resource_type)} {name!r}", res.get("error_message"))

    # -- groups -----------------------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group, asking every broker."""
        out: dict[str, str] = {}
        md = self.client.metadata([])
        for node in sorted(md.brokers):
            resp = self.client._with_retries(partial(self._list_groups_on, node), f"ListGroups on {node}")
            for g in resp["groups"]:
                out[g["group_id"]] = g["protocol_type"]
        return sorted(out.items())

    def _list_groups_on(self, node: int) -> dict:
        resp = self.client.send(node, ApiKey.LIST_GROUPS, {"states_filter": []})
        check(resp["error_code"], f"ListGroups on broker {node}")
        return resp

    def describe_group(self, group_id: str) -> GroupDescription:
        from .group import decode_assignment
        resp = self.client.send_to_coordinator(group_id, ApiKey.DESCRIBE_GROUPS,
                                               {"groups": [group_id], "include_authorized_operations": False},
                                               lambda r: r["groups"][0]["error_code"], f"DescribeGroups {group_id!r}")
        g = resp["groups"][0]
        check(g["error_code"], f"DescribeGroups {group_id!r}")
        members = []
        for m in g["members"]:
            assignment = decode_assignment(m["member_assignment"]) if g["protocol_type"] == "consumer" else []
            members.append(MemberDescription(m["member_id"], m["client_id"], m["client_host"], assignment))
        return GroupDescription(g["group_id"], g["group_state"], g["protocol_type"], g["protocol_data"], members,
                                self.client.find_coordinator(group_id))

    def delete_groups(self, group_ids: list[str]) -> dict[str, ClientError | None]:
        out: dict[str, ClientError | None] = {}
        for gid in group_ids:
            resp = self.client.send_to_coordinator(gid, ApiKey.DELETE_GROUPS, {"groups_names": [gid]},
                                                   lambda r: r["results"][0]["error_code"], f"DeleteGroups {gid!r}")
            r = resp["results"][0]
            out[gid] = ClientError.from_code(r["error_code"], f"group {gid!r}") if r["error_code"] else None
        return out

    def list_group_offsets(self, group_id: str, partitions: list[TopicPartition] | None = None
                           ) -> dict[TopicPartition, int]:
        return {tp: off for tp, (off, _m) in self.client.offset_fetch(group_id, partitions).items() if off >= 0}

    def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit offsets for an inactive group (generation -1, no member), as Kafka's tool does."""
        self.client.offset_commit(group_id, dict(offsets))


def _acl_filter_body(f: AclBindingFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal, "host_filter": f.host,
            "operation": int(f.operation), "permission_type": int(f.permission)}


def _kind(resource_type: int) -> str:
    return {TOPIC: "topic", BROKER: "broker"}.get(resource_type, f"resource type {resource_type}")


def _first_error(array: str):
    def err(resp: dict) -> int:
        for item in resp[array]:
            if item["error_code"]:
                return item["error_code"]
        return 0
    return err


def _result(item: dict, context: str) -> ClientError | None:
    if not item["error_code"]:
        return None
    return ClientError.from_code(item["error_code"], context, item.get("error_message"))
