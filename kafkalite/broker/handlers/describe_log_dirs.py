"""DescribeLogDirs (key 35, v0-2 as Kafka 2.8): this broker's log dirs and the partitions in each.

Every configured dir is answered: an online one with error 0 and the size of each partition's
log (from memory, no file I/O), an offline one with KAFKA_STORAGE_ERROR (56) and no topics.
``topics`` null asks for every partition. The controller sends this to a broker that reported a
log-dir failure (``/log_dir_event_notification``) to learn which of its replicas are offline:
those assigned to it and listed under no online dir. Version 1 is version 0 (throttling before
answering); version 2 is flexible.
"""
from __future__ import annotations

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import DescribeLogDirsRequest, DescribeLogDirsResponse


@api(ApiKey.DESCRIBE_LOG_DIRS, 0, 2)
def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "results": []}        # Kafka: nothing, without an error (v0-2)
    wanted = req["topics"]
    topics = None if wanted is None else {t["topic"]: set(t["partition_index"]) for t in wanted}
    return {"throttle_time_ms": 0, "results": ctx.replicas.describe_log_dirs(topics)}
