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

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.controller.decisions import PREFERRED, UNCLEAN, ElectionResult
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (ElectLeadersRequest, ElectLeadersResponse,
                                               ElectLeadersResponsePartitionResult)


def _response(version: int, results: dict[tuple[str, int], ElectionResult], top_error: int = 0) -> ElectLeadersResponse:
    by_topic: dict[str, list[ElectLeadersResponsePartitionResult]] = {}
    for (topic, p), (code, message, _leader) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": int(code), "error_message": message})
    body: ElectLeadersResponse = {"throttle_time_ms": 0, "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in by_topic.items()]}
    if version >= 1:
        body["error_code"] = top_error
    return body


@api(ApiKey.ELECT_LEADERS, 0, 2)
def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest,
                         ) -> ElectLeadersResponse | defer.Deferred[ElectLeadersResponse]:
    election_type = req["election_type"]      # v0: the decoder's default, 0 (PREFERRED)
    asked = req["topic_partitions"]
    everything = asked is None
    if asked is None:
        wanted = [(t, p) for t, info in sorted(ctx.metadata.topics.items()) for p in sorted(info.assignment)]
    else:
        wanted = list(dict.fromkeys((tp["topic"], p) for tp in asked for p in tp["partition_id"]))
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

    def finish(timed_out: bool) -> ElectLeadersResponse:
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
