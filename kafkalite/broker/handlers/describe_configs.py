"""DescribeConfigs (key 32): topic and broker settings with their sources and synonyms."""
from __future__ import annotations

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.config import BROKER_KEYS, TYPE_CODES, ConfigValue, render
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (DescribeConfigsRequest, DescribeConfigsResponse,
                                               DescribeConfigsResponseDescribeConfigsResourceResult,
                                               DescribeConfigsResponseDescribeConfigsResult)

TOPIC = 2
BROKER = 4


def _entry(row: ConfigValue, read_only: bool, synonyms: bool, docs: bool) -> DescribeConfigsResponseDescribeConfigsResourceResult:
    return {"name": row.name, "value": None if row.sensitive else render(row.value), "read_only": read_only,
            "config_source": row.source, "is_sensitive": row.sensitive,
            # a password's synonyms hide their values too
            "synonyms": [{"name": n, "value": None if row.sensitive else render(v), "source": s}
                         for n, v, s in row.synonyms] if synonyms else [],
            "config_type": TYPE_CODES.get(row.kind, 0), "documentation": row.doc if docs else None}


@api(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    synonyms = req["include_synonyms"]
    docs = req["include_documentation"]
    results: list[DescribeConfigsResponseDescribeConfigsResult] = []
    for res in req["resources"]:
        kind, name = res["resource_type"], res["resource_name"]
        out: DescribeConfigsResponseDescribeConfigsResult = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name, "configs": []}
        if kind == TOPIC and not ctx.authorize(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
            out["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif kind == BROKER and not ctx.authorize(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
            out["error_code"] = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        elif kind == TOPIC:
            info = ctx.metadata.topics.get(name)
            if info is None:
                out["error_code"], out["error_message"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), \
                    f"Topic '{name}' does not exist."
            else:
                rows = [(r, False) for r in ctx.config.describe_topic(info.config)]
        elif kind == BROKER:
            if name not in ("", str(ctx.broker_id)):
                out["error_code"], out["error_message"] = int(ErrorCode.INVALID_REQUEST), \
                    f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}"
            else:
                # the cluster default entity: only its dynamic configs (Kafka's ZooKeeper mode)
                described = ctx.config.describe_dynamic_default() if name == "" else ctx.config.describe_broker()
                rows = [(r, not BROKER_KEYS[r.name].dynamic) for r in described]
        else:
            out["error_code"], out["error_message"] = int(ErrorCode.INVALID_REQUEST), \
                f"Unsupported resource type {kind}"
        if out["error_code"] == 0:
            keys = res["configuration_keys"]
            out["configs"] = [_entry(r, ro, synonyms, docs) for r, ro in rows if keys is None or r.name in keys]
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}
