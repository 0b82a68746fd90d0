"""Topics and readiness on broker processes, over the wire: one helper each for the whole suite.

Tests of broker processes (the ``broker``, ``cluster_factory`` and ``ensemble_cluster_factory``
fixtures) create their topics and wait for the controller and for leaders through these, with
CreateTopics v4 and Metadata v8 on a fresh connection (:func:`tests.support.wire.request`), so
no test module carries its own copy. A test whose subject IS a client library's admin API (the
interop tiers' kafka-python and aiokafka admin clients, a TLS/SASL client, kafkalite's own
``KafkaClient``) creates its topics through that client instead. The in-process tier has
:meth:`tests.support.inprocess.InProcessCluster.create_topic`.

``target`` is a bootstrap string (``"127.0.0.1:port"``) or a broker process (anything with
``.bootstrap``).
"""
from __future__ import annotations

from typing import Any, Mapping

from kafkalite.protocol.api_keys import ApiKey
from tests.support.waiting import wait_for
from tests.support.wire import metadata_body, request

__all__ = ["create_topic", "wait_controller", "wait_leaders"]


def _bootstrap(target: Any) -> str:
    return target if isinstance(target, str) else target.bootstrap


def create_topic(target: Any, name: str, partitions: int = 1, replication_factor: int = 1,
                 configs: Mapping[str, str] | None = None, timeout_ms: int = 15000) -> dict[str, Any]:
    """CreateTopics v4 for one topic (the broker answers once the topic exists or ``timeout_ms``
    passed); asserts it succeeded and returns the topic's result."""
    resp = request(_bootstrap(target), ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                    "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": timeout_ms, "validate_only": False})
    result: dict[str, Any] = resp["topics"][0]
    assert result["error_code"] == 0, resp
    return result


def wait_controller(broker: Any, timeout: float = 30.0) -> None:
    """Readiness for admin requests on a one-broker cluster: registration comes before the
    controller election, so wait until Metadata names this broker as the controller (what admin
    clients route on)."""
    wait_for(lambda: request(broker.bootstrap, ApiKey.METADATA, 8, metadata_body([]))["controller_id"]
             == broker.broker_id, timeout, f"broker {broker.broker_id} to be the controller")


def wait_leaders(broker: Any, topic: str, partitions: int = 1, timeout: float = 30.0) -> dict[str, Any]:
    """Wait until Metadata shows ``broker`` leading all ``partitions`` of ``topic``; the topic's
    Metadata entry."""
    def led() -> dict[str, Any] | None:
        t: dict[str, Any] = request(broker.bootstrap, ApiKey.METADATA, 8, metadata_body([topic]))["topics"][0]
        ok = (t["error_code"] == 0 and len(t["partitions"]) == partitions
              and all(p["leader_id"] == broker.broker_id for p in t["partitions"]))
        return t if ok else None
    found: dict[str, Any] = wait_for(led, timeout, f"{topic}'s {partitions} partition(s) led by broker {broker.broker_id}")
    return found
