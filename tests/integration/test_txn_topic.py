"""The transaction coordinator's topic on a real broker: FindCoordinator with key type 1 creates
``__transaction_state`` on first use with Kafka's settings and then names the broker leading the
id's partition."""
from __future__ import annotations

import json
from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.waiting import wait_for
from tests.support.wire import request

FIND, METADATA = 10, 3


def txn_coordinator(bootstrap: str, txn_id: str) -> dict[str, Any]:
    def found() -> Any:
        r = request(bootstrap, FIND, 2, {"key": txn_id, "key_type": 1})
        return r if r["error_code"] == 0 else None
    return wait_for(found, 30, f"a transaction coordinator for {txn_id}")


def test_find_coordinator_creates_the_transaction_state_topic(broker: Any) -> None:
    """The first FindCoordinator(key type 1) answers COORDINATOR_NOT_AVAILABLE (creating the
    topic), later ones this broker; the topic is internal, compacted, with
    transaction.state.log.num.partitions partitions and min.isr as its min.insync.replicas; an
    unknown key type is INVALID_REQUEST."""
    first = request(broker.bootstrap, FIND, 2, {"key": "tx-a", "key_type": 1})
    assert first["error_code"] in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    c = txn_coordinator(broker.bootstrap, "tx-a")
    assert (c["node_id"], f"{c['host']}:{c['port']}") == (broker.broker_id, broker.bootstrap)
    meta = request(broker.bootstrap, METADATA, 8, {"topics": [{"name": "__transaction_state"}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_cluster_authorized_operations": False,
                                                   "include_topic_authorized_operations": False})
    topic = meta["topics"][0]
    assert topic["error_code"] == 0 and topic["is_internal"] and len(topic["partitions"]) == 5
    config = json.loads(broker.cluster.zk_get("/config/topics/__transaction_state"))["config"]
    assert config["cleanup.policy"] == "compact" and config["min.insync.replicas"] == "1"
    assert config["segment.bytes"] == "104857600"
    bad = request(broker.bootstrap, FIND, 2, {"key": "tx-a", "key_type": 2})
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST
