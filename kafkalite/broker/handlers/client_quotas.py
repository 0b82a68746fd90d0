"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0 (v1 is the flexible encoding), as
Kafka 2.8's ZooKeeper-mode brokers answer them: any broker reads or writes ZooKeeper directly.

Entities are made of ``user`` and ``client-id`` parts (a null name is the ``<default>`` entity);
quotas live in ``/config/users/<u>``, ``/config/clients/<c>`` and ``/config/users/<u>/clients/<c>``
with a ``/config/changes`` notification per change, so every broker (this one too) applies them
when the notification arrives. The ``ip`` entity type (connection-rate quotas) is not served:
INVALID_REQUEST, as Kafka answers an entity type it does not know.

DescribeClientQuotas filters: per component an entity type and exact name (0), the default (1) or
any name (2); with ``strict`` an entity must have no other parts. Unknown keys, non-integral byte
rates and non-positive values are refused with INVALID_REQUEST for that entry.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.quota import DEFAULT, QUOTA_KEYS, REQUEST_PERCENTAGE, QuotaEntity
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (AlterClientQuotasRequest, AlterClientQuotasRequestEntityData,
                                               AlterClientQuotasRequestOpData, AlterClientQuotasResponse,
                                               AlterClientQuotasResponseEntryData, DescribeClientQuotasRequest,
                                               DescribeClientQuotasRequestComponentData, DescribeClientQuotasResponse,
                                               DescribeClientQuotasResponseEntityData,
                                               DescribeClientQuotasResponseEntryData)

USER, CLIENT_ID = "user", "client-id"
EXACT, DEFAULT_MATCH, ANY = 0, 1, 2


class _Invalid(Exception):
    pass


def _entity(parts: list[AlterClientQuotasRequestEntityData]) -> QuotaEntity:
    names: dict[str, str] = {}
    for part in parts:
        kind = part["entity_type"]
        if kind not in (USER, CLIENT_ID):
            raise _Invalid(f"Unhandled client quota entity type: {kind}")
        if kind in names:
            raise _Invalid(f"Duplicate {kind} entity type in the entity")
        names[kind] = DEFAULT if part["entity_name"] is None else part["entity_name"]
    if not names:
        raise _Invalid("Invalid empty client quota entity")
    return QuotaEntity(names.get(USER), names.get(CLIENT_ID))


def _wire_entity(entity: QuotaEntity) -> list[DescribeClientQuotasResponseEntityData]:
    out: list[DescribeClientQuotasResponseEntityData] = []
    if entity.user is not None:
        out.append({"entity_type": USER, "entity_name": None if entity.user == DEFAULT else entity.user})
    if entity.client_id is not None:
        out.append({"entity_type": CLIENT_ID, "entity_name": None if entity.client_id == DEFAULT else entity.client_id})
    return out


def _matches(component: DescribeClientQuotasRequestComponentData | None, name: str | None, strict: bool) -> bool:
    if component is None:
        return name is None or not strict
    if name is None:
        return False
    if component["match_type"] == EXACT:
        return name == component["match"]
    if component["match_type"] == DEFAULT_MATCH:
        return name == DEFAULT
    return True


@api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
@defer.inlineCallbacks
def handle_describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest,
                                  ) -> Generator[Any, Any, DescribeClientQuotasResponse]:
    def refused(message: str) -> DescribeClientQuotasResponse:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST), "error_message": message,
                "entries": None}
    if not ctx.authorize(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "error_message": "Cluster authorization failed.", "entries": None}

    components: dict[str, DescribeClientQuotasRequestComponentData] = {}
    for c in req["components"]:
        if c["entity_type"] not in (USER, CLIENT_ID):
            return refused(f"Custom entity type '{c['entity_type']}' not supported")
        if c["entity_type"] in components:
            return refused(f"Duplicate {c['entity_type']} filter component entity type")
        if c["match_type"] not in (EXACT, DEFAULT_MATCH, ANY) or (c["match_type"] == EXACT) != (c["match"] is not None):
            return refused(f"Invalid match type {c['match_type']} with match {c['match']!r}")
        components[c["entity_type"]] = c
    store = ctx.quotas.store
    if store is None:
        return refused("no quota store on this broker")
    every = yield store.read_all()
    entries: list[DescribeClientQuotasResponseEntryData] = []
    for entity, values in sorted(every.items(), key=lambda kv: (kv[0].user or "", kv[0].client_id or "")):
        if _matches(components.get(USER), entity.user, req["strict"]) and \
                _matches(components.get(CLIENT_ID), entity.client_id, req["strict"]):
            entries.append({"entity": _wire_entity(entity),
                            "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _validate(ops: list[AlterClientQuotasRequestOpData]) -> dict[str, float | None]:
    """key -> new value (None: remove)."""
    out: dict[str, float | None] = {}
    for op in ops:
        key, value = op["key"], op["value"]
        if key not in QUOTA_KEYS:
            raise _Invalid(f"Invalid configuration key {key}")
        if key in out:
            raise _Invalid(f"Duplicate quota key {key}")
        if op["remove"]:
            out[key] = None
            continue
        if not value > 0:
            raise _Invalid(f"{key} must be positive, got {value}")
        if key != REQUEST_PERCENTAGE and value != int(value):
            raise _Invalid(f"Configuration {key} must be a Long value")
        out[key] = value
    return out


@api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1)
@defer.inlineCallbacks
def handle_alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest,
                               ) -> Generator[Any, Any, AlterClientQuotasResponse]:
    store = ctx.quotas.store
    results: list[AlterClientQuotasResponseEntryData] = []
    if not ctx.authorize(Operation.ALTER_CONFIGS, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "error_message": "Cluster authorization failed.",
             "entity": e["entity"]} for e in req["entries"]]}
    for entry in req["entries"]:
        result: AlterClientQuotasResponseEntryData = {"error_code": 0, "error_message": None, "entity": entry["entity"]}
        results.append(result)
        try:
            entity = _entity(entry["entity"])
            changes = _validate(entry["ops"])
        except _Invalid as exc:
            result["error_code"], result["error_message"] = int(ErrorCode.INVALID_REQUEST), str(exc)
            continue
        if req["validate_only"] or store is None:
            continue
        quotas = yield store.read_one(entity)
        for key, value in changes.items():
            if value is None:
                quotas.pop(key, None)
            else:
                quotas[key] = value
        yield store.write(entity, quotas)
    return {"throttle_time_ms": 0, "entries": results}
