"""AlterReplicaLogDirs (key 34, v0-2 as Kafka 2.8): move replicas between this broker's log dirs.

Per partition: LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``, KAFKA_STORAGE_ERROR
for an offline dir or replica, REPLICA_NOT_AVAILABLE when the replica is not on this broker yet (it
is then created in that dir when it comes, which is how a reassignment plan's ``log_dirs`` work),
else NONE and a future replica in the dir copies the log and takes over once caught up
(broker/log_dir_mover.py). Version 1 is version 0 (throttling before answering); v2 is flexible.
"""
from __future__ import annotations

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
                                               AlterReplicaLogDirsResponseAlterReplicaLogDirPartitionResult)


@api(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2)
def handle_alter_replica_log_dirs(ctx: RequestContext, req: AlterReplicaLogDirsRequest,
                                  ) -> AlterReplicaLogDirsResponse:
    results: dict[str, list[AlterReplicaLogDirsResponseAlterReplicaLogDirPartitionResult]] = {}
    for entry in req["dirs"]:
        for topic in entry["topics"]:
            out = results.setdefault(topic["name"], [])
            for index in topic["partitions"]:
                code = ctx.replicas.alter_log_dir(topic["name"], index, entry["path"])
                out.append({"partition_index": index, "error_code": int(code)})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in results.items()]}
