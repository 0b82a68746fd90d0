"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37): controller-only topic admin.

Each answers per topic; validation errors never stop the other topics of the request. After the
ZooKeeper writes the handler waits up to the request's timeout for the metadata to show the
result (leaders elected, topic gone); past it the answer is REQUEST_TIMED_OUT while the change
still completes, as in Kafka.

Version notes (Kafka 2.8): CreateTopics v5, DeleteTopics v4 and CreatePartitions v2 are the
flexible versions; CreateTopics v5+ answers each topic's partitions, replication factor and
configs (also with validate_only), v7 its topic id (KIP-516); DeleteTopics v5 answers an error
message, v6 deletes topics named by id (UNKNOWN_TOPIC_ID for an id no topic has).
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Generator, Sequence
from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.broker.replica_manager import INTERNAL_TOPICS
from kafkalite.config import render
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (CreatePartitionsRequest, CreatePartitionsResponse,
                                               CreatePartitionsResponseCreatePartitionsTopicResult, CreateTopicsRequest,
                                               CreateTopicsResponse, CreateTopicsResponseCreatableTopicResult,
                                               DeleteTopicsRequest, DeleteTopicsResponse,
                                               DeleteTopicsResponseDeletableTopicResult)
from kafkalite.protocol.schema import ZERO_UUID

log = logging.getLogger(__name__)

#: A per-topic result entry of any of the three APIs (each has an error code and message).
_Result = (CreateTopicsResponseCreatableTopicResult | DeleteTopicsResponseDeletableTopicResult
           | CreatePartitionsResponseCreatePartitionsTopicResult)


def _error(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, KafkaError):
        return int(exc.code), str(exc)
    log.error("topic admin failed: %r", exc)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), str(exc) or type(exc).__name__


def _refusal(name: str, counts: Counter, ctx: RequestContext) -> tuple[int, str] | None:
    """The per-topic checks CreateTopics and CreatePartitions share, before any validation: a topic
    named twice in one request, and a broker that is not (or no longer) the controller."""
    if counts[name] > 1:
        return int(ErrorCode.INVALID_REQUEST), "Duplicate topic in request."
    if not ctx.controller.active:
        return int(ErrorCode.NOT_CONTROLLER), "This is not the controller."
    return None


@defer.inlineCallbacks
def _run_all(jobs: Sequence[tuple[_Result, defer.Deferred]]) -> Any:
    """Await each job's Deferred, filling its result entry's error on failure."""
    for entry, d in jobs:
        try:
            yield d
        except Exception as exc:
            entry["error_code"], entry["error_message"] = _error(exc)


@api(ApiKey.CREATE_TOPICS, 2, 7)
@defer.inlineCallbacks
def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> Generator[Any, Any, CreateTopicsResponse]:
    admin = ctx.topics
    counts = Counter(t["name"] for t in req["topics"])
    create_on_cluster = ctx.authorize(Operation.CREATE, ResourceType.CLUSTER)     # else Create on each topic
    results: list[CreateTopicsResponseCreatableTopicResult] = []
    jobs: list[tuple[CreateTopicsResponseCreatableTopicResult, defer.Deferred]] = []
    sizes: dict[str, int] = {}
    described = ctx.api_version >= 5
    for t in req["topics"]:
        entry: CreateTopicsResponseCreatableTopicResult = {"name": t["name"], "error_code": 0, "error_message": None}
        if described:       # Kafka's defaults for a topic that is not created
            _not_created(entry)
        results.append(entry)
        refusal = _refusal(t["name"], counts, ctx)
        if refusal is None and not create_on_cluster and not ctx.authorize(Operation.CREATE, ResourceType.TOPIC, t["name"]):
            refusal = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "Authorization failed."
        if refusal is not None:
            entry["error_code"], entry["error_message"] = refusal
            continue
        try:
            configs = {c["name"]: c["value"] for c in t["configs"]}
            assignment, overrides = admin.plan_topic(t["name"], t["num_partitions"], t["replication_factor"],
                                                     t["assignments"], configs)
        except KafkaError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
            continue
        if described:
            _describe_created(entry, ctx, assignment, overrides)
        if not req["validate_only"]:
            jobs.append((entry, admin.create_topic(t["name"], assignment, overrides)))
            sizes[t["name"]] = len(assignment)
    yield _run_all(jobs)
    created = [e["name"] for e, _ in jobs if e["error_code"] == 0]

    def ready(name: str) -> bool:
        # The config znode is written (and may be seen) before the assignment: a topic known
        # only by its config has no partitions yet, and "all leaders known" would hold vacuously.
        info = ctx.metadata.topics.get(name)
        return (info is not None and len(info.assignment) >= sizes[name]
                and ctx.metadata.all_leaders_known(name))

    if created:
        ok = yield admin.wait_until(lambda: all(ready(n) for n in created), req["timeout_ms"])
        if not ok:
            for e, _ in jobs:
                if e["error_code"] == 0 and not ready(e["name"]):
                    e["error_code"], e["error_message"] = int(ErrorCode.REQUEST_TIMED_OUT), \
                        "Leaders were not elected within the timeout; the topic is still being created."
    for e in results:
        if e["error_code"] not in (0, ErrorCode.REQUEST_TIMED_OUT) and described:
            _not_created(e)
        # v7 (KIP-516): the new topic's id, as written to its znode; none for validate_only
        info = ctx.metadata.topics.get(e["name"])
        e["topic_id"] = info.topic_uuid if info is not None and e["error_code"] == 0 and not req["validate_only"] \
            else ZERO_UUID
    return {"throttle_time_ms": 0, "topics": results}


def _not_created(entry: CreateTopicsResponseCreatableTopicResult) -> None:
    """CreateTopics v5+: Kafka's description of a topic that is not created."""
    entry["num_partitions"], entry["replication_factor"], entry["configs"] = -1, -1, None


def _describe_created(entry: CreateTopicsResponseCreatableTopicResult, ctx: RequestContext,
                      assignment: dict[int, list[int]], overrides: dict[str, str]) -> None:
    """CreateTopics v5+ (KIP-525): what the topic is (or, with validate_only, would be) created
    with: its partition count, replication factor and every topic config with its source, so
    a client needs no DescribeConfigs round trip. Sensitive values are null, as DescribeConfigs."""
    rows = ctx.config.describe_topic(overrides)
    entry["num_partitions"] = len(assignment)
    entry["replication_factor"] = len(next(iter(assignment.values()))) if assignment else -1
    entry["configs"] = [{"name": r.name, "value": None if r.sensitive else render(r.value), "read_only": False,
                         "config_source": r.source, "is_sensitive": r.sensitive} for r in rows]


@api(ApiKey.DELETE_TOPICS, 1, 6)
@defer.inlineCallbacks
def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> Generator[Any, Any, DeleteTopicsResponse]:
    results: list[DeleteTopicsResponseDeletableTopicResult] = []
    jobs: list[tuple[DeleteTopicsResponseDeletableTopicResult, defer.Deferred]] = []
    named: list[tuple[str | None, Any, ErrorCode | None]]
    if ctx.api_version >= 6:
        named = _delete_targets(ctx, req)
    else:
        named = [(name, ZERO_UUID, None) for name in req["topic_names"]]
    for name, topic_id, refusal in named:
        entry: DeleteTopicsResponseDeletableTopicResult = {"name": name, "topic_id": topic_id, "error_code": 0}
        results.append(entry)
        if refusal is not None:
            entry["error_code"] = int(refusal)
        elif name is None:
            entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_ID)
        elif not ctx.controller.active:
            entry["error_code"] = int(ErrorCode.NOT_CONTROLLER)
        elif not ctx.config["delete.topic.enable"]:
            entry["error_code"] = int(ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST)
        elif not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, name):
            entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)    # existence not disclosed
        elif name not in ctx.metadata.topics:
            entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif not ctx.authorize(Operation.DELETE, ResourceType.TOPIC, name):
            entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif name in INTERNAL_TOPICS:
            entry["error_code"] = int(ErrorCode.INVALID_REQUEST)
        else:
            jobs.append((entry, ctx.topics.delete_topic(name)))
    yield _run_all(jobs)
    queued = [str(e["name"]) for e, _ in jobs if e["error_code"] == 0]
    if queued:
        gone = lambda: all(n not in ctx.metadata.topics for n in queued)  # noqa: E731
        ok = yield ctx.topics.wait_until(gone, req["timeout_ms"])
        if not ok:
            for e, _ in jobs:
                if e["error_code"] == 0 and e["name"] in ctx.metadata.topics:
                    e["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
    for e in results:
        message = e.pop("error_message", None)
        if ctx.api_version >= 5:        # v5 carries the error's message
            e["error_message"] = message if e["error_code"] else None
    return {"throttle_time_ms": 0, "responses": results}


def _delete_targets(ctx: RequestContext, req: DeleteTopicsRequest) -> list[tuple[str | None, Any, ErrorCode | None]]:
    """DeleteTopics v6 (KIP-516): each topic by name or by id, as (name or None when the id is
    unknown, the id as sent, a refusal). Naming both a topic and an id refuses the whole
    request with INVALID_REQUEST, as Kafka 2.8's error response."""
    topics = req["topics"]
    both = any(t["name"] is not None and t["topic_id"] != ZERO_UUID for t in topics)
    by_id = {info.topic_uuid: name for name, info in ctx.metadata.topics.items() if info.topic_id}
    out: list[tuple[str | None, Any, ErrorCode | None]] = []
    for t in topics:
        name = t["name"] if t["topic_id"] == ZERO_UUID else by_id.get(t["topic_id"])
        out.append((name, t["topic_id"], ErrorCode.INVALID_REQUEST if both else None))
    return out


@api(ApiKey.CREATE_PARTITIONS, 0, 3)
@defer.inlineCallbacks
def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest,
                             ) -> Generator[Any, Any, CreatePartitionsResponse]:
    counts = Counter(t["name"] for t in req["topics"])
    results: list[CreatePartitionsResponseCreatePartitionsTopicResult] = []
    jobs: list[tuple[CreatePartitionsResponseCreatePartitionsTopicResult, defer.Deferred]] = []
    for t in req["topics"]:
        entry: CreatePartitionsResponseCreatePartitionsTopicResult = {"name": t["name"], "error_code": 0, "error_message": None}
        results.append(entry)
        refusal = _refusal(t["name"], counts, ctx)
        if refusal is None and not ctx.authorize(Operation.ALTER, ResourceType.TOPIC, t["name"]):
            refusal = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "The topic authorization is failed."
        if refusal is not None:
            entry["error_code"], entry["error_message"] = refusal
            continue
        try:
            new = ctx.topics.plan_partitions(t["name"], t["count"], t["assignments"])
        except KafkaError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
            continue
        if not req["validate_only"]:
            jobs.append((entry, ctx.topics.add_partitions(t["name"], new)))
    yield _run_all(jobs)
    grown = {e["name"]: next(t["count"] for t in req["topics"] if t["name"] == e["name"])
             for e, _ in jobs if e["error_code"] == 0}
    if grown:
        def ready() -> bool:
            m = ctx.metadata
            return all(n in m.topics and len(m.topics[n].assignment) >= c and m.all_leaders_known(n)
                       for n, c in grown.items())
        ok = yield ctx.topics.wait_until(ready, req["timeout_ms"])
        if not ok:
            for e, _ in jobs:
                if e["name"] in grown:
                    e["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
    return {"throttle_time_ms": 0, "results": results}
