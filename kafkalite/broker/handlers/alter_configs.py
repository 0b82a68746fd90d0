"""AlterConfigs (33) and IncrementalAlterConfigs (44): change topic overrides at runtime.

Any broker may answer, as in ZooKeeper-mode Kafka (AdminManager writes ZooKeeper directly): the
new overrides are validated with the same table CreateTopics uses, then written to
``/config/topics/<t>`` with a ``/config/changes`` notification (``KafkaZkClient.set_topic_config``).
Every broker watches each topic's config znode (``metadata_sync``) and hands the new log config to
its partitions, so ``retention.ms`` and friends apply without a restart.

AlterConfigs replaces the whole set of a topic's overrides (a key named twice: the last wins);
IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per key on top of the current
overrides, read from ZooKeeper (not the metadata cache, which may lag a just-completed change);
APPEND / SUBTRACT start from the effective value. AlterConfigs v2 and IncrementalAlterConfigs
v1 are the flexible versions (Kafka 2.8).

A BROKER resource (dynamic broker configs, KIP-226) names this broker's id (``/config/brokers/<id>``)
or "" (``/config/brokers/<default>``, any broker may write it); only the keys Kafka marks dynamic
are accepted (others: INVALID_REQUEST "Cannot update these configs dynamically", as Kafka), the
per-broker ones (listeners, SASL settings) only for a broker id, values are checked with the broker
table and the whole resulting config, then by every reconfigurable the change concerns, as Kafka's
DynamicBrokerConfig.validate does (``DynamicBrokerConfigSync.validate``), before anything is
written; the write notifies every broker (broker/dynamic_config.py).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping
from typing import Any, cast

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.config import BROKER_KEYS, TOPIC_KEYS, ConfigError, render, validate_topic_overrides
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (AlterConfigsRequest, AlterConfigsRequestAlterableConfig,
                                               AlterConfigsResponse, AlterConfigsResponseAlterConfigsResourceResponse,
                                               IncrementalAlterConfigsRequest,
                                               IncrementalAlterConfigsRequestAlterableConfig,
                                               IncrementalAlterConfigsResponse)

log = logging.getLogger(__name__)

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


#: A resource's ``configs`` in either request (AlterConfigs: name and value; incremental: with an operation).
_Configs = list[AlterConfigsRequestAlterableConfig] | list[IncrementalAlterConfigsRequestAlterableConfig]


def _ops(configs: _Configs) -> list[IncrementalAlterConfigsRequestAlterableConfig]:
    """The configs of an IncrementalAlterConfigs resource (``_alter`` calls this only with
    ``incremental``, i.e. for that request; the two requests share the walk over resources)."""
    return cast(list[IncrementalAlterConfigsRequestAlterableConfig], configs)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


def _incremental(current: dict[str, str], ops: list[IncrementalAlterConfigsRequestAlterableConfig],
                 effective_default: Callable[[str], str], table: Mapping[str, Any] = TOPIC_KEYS) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a copy of ``current`` (Kafka's AdminManager
    rules). APPEND and SUBTRACT start from the effective value: the override if there is one,
    else ``effective_default(name)`` (the broker's default for a topic key, the broker's current
    value for a broker key), so APPEND ``compact`` to a topic with the default ``delete`` gives
    ``delete,compact``."""
    out = dict(current)
    seen: set[str] = set()
    for op in ops:
        name, kind, value = op["name"], op["config_operation"], op["value"]
        if name in seen:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {name}")
        seen.add(name)
        key = table.get(name)
        if key is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if kind == SET:
            if value is None:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Null value not supported for topic config {name}")
            out[name] = value
        elif kind == DELETE:
            out.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if key.kind != "list":       # Kafka's AdminManager: InvalidRequestException
                raise _Refused(ErrorCode.INVALID_REQUEST,
                               f"Config value append is not allowed for config key: {name}" if kind == APPEND else
                               f"Config value subtract is not allowed for config key: {name}")
            start = out[name] if name in out else effective_default(name)
            items = [v.strip() for v in start.split(",") if v.strip()]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if kind == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            # an empty list is a value of its own (not "back to the default", which may not be empty)
            out[name] = ",".join(items)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind} for {name}")
    return out


@defer.inlineCallbacks
def _alter(ctx: RequestContext, req: AlterConfigsRequest | IncrementalAlterConfigsRequest,
           incremental: bool) -> Generator[Any, Any, AlterConfigsResponse]:
    responses: list[AlterConfigsResponseAlterConfigsResourceResponse] = []
    for res in req["resources"]:
        kind, name = res["resource_type"], res["resource_name"]
        entry: AlterConfigsResponseAlterConfigsResourceResponse = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name}
        responses.append(entry)
        try:
            if kind == BROKER and not ctx.authorize(Operation.ALTER_CONFIGS, ResourceType.CLUSTER):
                raise _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            if kind == TOPIC and not ctx.authorize(Operation.ALTER_CONFIGS, ResourceType.TOPIC, name):
                raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            if kind == BROKER:
                yield _alter_broker(ctx, name, res["configs"], incremental, req["validate_only"])
                continue
            if kind != TOPIC:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")
            if name not in ctx.metadata.topics:
                raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
            asked: dict[str, str | None]
            if incremental:
                current = yield ctx.topics.topic_overrides(name)
                asked = dict(_incremental(current, _ops(res["configs"]),
                                          lambda key: render(ctx.config.topic_default(key)[0]) or ""))
            else:
                # a key named twice: the last one wins, as Kafka 2.x's AlterConfigs (a Properties)
                asked = {c["name"]: c["value"] for c in res["configs"]}
            try:
                new = validate_topic_overrides(asked)
            except ConfigError as exc:
                raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if not req["validate_only"]:
                yield ctx.topics.set_topic_overrides(name, new)
                log.info("topic %s config overrides now %s", name, new)
        except _Refused as exc:
            entry["error_code"], entry["error_message"] = int(exc.code), exc.message
        except Exception as exc:  # noqa: BLE001 - ZooKeeper trouble: one resource fails, not the request
            log.error("altering configs of %s failed: %r", name, exc)
            entry["error_code"], entry["error_message"] = int(ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)
    return {"throttle_time_ms": 0, "responses": responses}


@defer.inlineCallbacks
def _alter_broker(ctx: RequestContext, name: str, configs: _Configs, incremental: bool,
                  validate_only: bool) -> Any:
    """Kafka's AdminManager for a BROKER resource in ZooKeeper mode."""
    if name and name != str(ctx.broker_id):
        raise _Refused(ErrorCode.INVALID_REQUEST,
                       f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}")
    store = ctx.dynamic_config
    if store is None:
        raise _Refused(ErrorCode.INVALID_REQUEST, "dynamic broker configs need ZooKeeper")
    static = sorted({c["name"] for c in configs
                     if c["name"] not in BROKER_KEYS or not BROKER_KEYS[c["name"]].dynamic})
    if static:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {', '.join(static)}")
    if incremental:
        current = yield store.read_decoded(name)
        new = _incremental(current, _ops(configs), lambda key: render(ctx.config[key]) or "", BROKER_KEYS)
    else:
        new = {c["name"]: c["value"] for c in configs if c["value"] is not None}     # last one wins
    resource = f"ConfigResource(type=BROKER, name='{name}')"          # Kafka's ConfigResource.toString
    try:
        store.validate(name, new)             # the table's checks, then each reconfigurable's
    except ConfigError as exc:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {resource}: {exc}")
    if not validate_only:
        try:
            d = store.write_encoded(name, new)
        except ConfigError as exc:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {resource}: {exc}")
        yield d
        log.info("dynamic config of %s now %s", f"broker {name}" if name else "the default broker",
                 {k: "[hidden]" if BROKER_KEYS[k].kind == "password" else v for k, v in new.items()})


@api(ApiKey.ALTER_CONFIGS, 0, 2)
def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> defer.Deferred[AlterConfigsResponse]:
    return _alter(ctx, req, incremental=False)


@api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
def handle_incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest,
                                     ) -> defer.Deferred[IncrementalAlterConfigsResponse]:
    return _alter(ctx, req, incremental=True)
