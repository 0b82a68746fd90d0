"""ElectLeaders (key 43, v0-2 as in Kafka 2.8): preferred or unclean leader election, on the controller.

v0 has no ElectionType (always preferred) and no top-level ErrorCode; v1 adds both; v2 is the
flexible encoding. The controller decides and writes each partition's new state through its fenced
path (``Controller.elect_leaders``); as Kafka's DelayedElectLeader, the answer waits (up to
TimeoutMs) until this broker's metadata shows the elected leaders, so a client that re-reads
Metadata right after sees them. A broker that is not the controller answers NOT_CONTROLLER for
every partition (the admin client sends to the controller and follows it).

Null TopicPartitions means every partition; the answer then leaves out those whose election was
not needed (as Kafka's KafkaApis does). An unknown election type gets INVALID_REQUEST.
"""
from __future__ import annotations

from typing import Any

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.controller.decisions import PREFERRED, UNCLEAN, ElectionResult
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey


def _response(version: int, results: dict[tuple[str, int], ElectionResult], top_error: int = 0) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (code, message, _leader) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": int(code), "error_message": message})
    body: dict[str, Any] = {"throttle_time_ms": 0, "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in by_topic.items()]}
    if version >= 1:
        body["error_code"] = top_error
    return body


@api(ApiKey.ELECT_LEADERS, 0, 2)
def handle_elect_leaders(ctx: RequestContext, req: dict[str, Any]) -> Any:
    election_type = req.get("election_type", PREFERRED) if ctx.api_version >= 1 else PREFERRED
    everything = req["topic_partitions"] is None
    if everything:
        wanted = [(t, p) for t, info in sorted(ctx.metadata.topics.items()) for p in sorted(info.assignment)]
    else:
        wanted = list(dict.fromkeys((tp["topic"], p) for tp in req["topic_partitions"] for p in tp["partition_id"]))
    if not ctx.authorize(Operation.ALTER, ResourceType.CLUSTER):
        denied = {k: ElectionResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, -1) for k in wanted}
        return _response(ctx.api_version, denied, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if election_type not in (PREFERRED, UNCLEAN):
        bad = {k: ElectionResult(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}", -1) for k in wanted}
        return _response(ctx.api_version, bad, int(ErrorCode.INVALID_REQUEST))
    timeout_ms = max(req["timeout_ms"], 0)
    decided: dict[str, dict[tuple[str, int], ElectionResult] | None] = {"results": None}
    metadata = ctx.metadata

    def arrived(results: dict[tuple[str, int], ElectionResult]) -> None:
        decided["results"] = results
        ctx.topics.metadata_changed()

    ctx.controller.elect_leaders(election_type, wanted).addCallback(arrived)

    def shown(key: tuple[str, int], result: ElectionResult) -> bool:
        if result.code != ErrorCode.NONE:
            return True
        state = metadata.states.get(key)
        return state is not None and state.leader == result.leader

    def ready() -> bool:
        results = decided["results"]
        return results is not None and all(shown(k, r) for k, r in results.items())

    def finish(timed_out: bool) -> dict[str, Any]:
        results = decided["results"]
        final: dict[tuple[str, int], ElectionResult] = {}
        for key in wanted:
            result = results.get(key) if results is not None else None
            if result is None or not shown(key, result):
                result = ElectionResult(ErrorCode.REQUEST_TIMED_OUT, "the election did not complete within the timeout", -1)
            if everything and result.code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            final[key] = result
        return _response(ctx.api_version, final)

    return ctx.topics.await_metadata(timeout_ms, ready, finish)
