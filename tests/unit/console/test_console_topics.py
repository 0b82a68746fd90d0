"""Overview and topics pages over a real broker: the list (search, paging), the topic page
(partitions, offsets, configs with their documentation) and the topic actions."""
from __future__ import annotations

import html
from typing import Any

from kafkalite.client import Producer
from kafkalite.client.cluster import ClusterMetadata, PartitionMetadata, TopicMetadata
from kafkalite.client.admin import NewTopic
from kafkalite.console.context import ConsoleContext
from kafkalite.console.services.overview import Overview, summarise
from kafkalite.console.services.topics import TopicsService
from kafkalite.console.settings import ConsoleSettings
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey

from .conftest import Console, make_console


def test_overview_shows_the_broker_controller_and_health(console: Console, broker: object) -> None:
    page = console.get("/")
    assert page.status_code == 200
    assert 'id="health">healthy<' in page.text
    assert f"{broker.bootstrap}" in page.text           # type: ignore[attr-defined]
    assert ">up<" in page.text


def test_create_topic_then_list_search_and_page(console: Console) -> None:
    for i in range(3):
        r = console.post("/topics", {"name": f"paged-{i}", "partitions": "2", "replication_factor": "1",
                                     "configs": "retention.ms=123456"})
        assert r.status_code == 303 and r.headers["location"] == f"/topics/paged-{i}"
    page = console.get("/topics?search=paged-&size=2")
    assert "3 topic(s)" in page.text and "page 1 of 2" in page.text
    assert ">paged-0<" in page.text and ">paged-1<" in page.text and ">paged-2<" not in page.text
    second = console.get("/topics?search=paged-&size=2&page=2")
    assert ">paged-2<" in second.text and ">paged-0<" not in second.text


def test_topic_page_partitions_offsets_and_configs(console: Console, broker: object) -> None:
    console.post("/topics", {"name": "detail-t", "partitions": "2", "replication_factor": "1"})
    with Producer(broker.bootstrap) as p:         # type: ignore[attr-defined]
        for i in range(5):
            p.send("detail-t", f"v{i}".encode(), partition=0)
    page = console.get("/topics/detail-t")
    assert page.status_code == 200
    rows = page.text.split('id="partitions"')[1].split("</table>")[0]
    assert "<td>0</td><td>5</td><td>5</td>" in rows.replace("\n", "")       # log start, end, messages of p0
    assert "retention.ms" in page.text and "cleanup.policy" in page.text
    assert "delete and/or compact" in page.text          # kafkalite's own documentation of cleanup.policy


def test_edit_config_override_then_reset_to_default(console: Console) -> None:
    console.post("/topics", {"name": "cfg-t", "partitions": "1", "replication_factor": "1"})
    r = console.post("/topics/cfg-t/config", {"key": "retention.ms", "value": "7777"})
    assert r.status_code == 303
    page = console.get("/topics/cfg-t").text
    assert '<b>retention.ms</b>' in page and 'data-name="retention.ms">7777<' in page
    console.post("/topics/cfg-t/config", {"key": "retention.ms", "reset": "1"})
    page = console.get("/topics/cfg-t").text
    assert '<b>retention.ms</b>' not in page and 'data-name="retention.ms">7777<' not in page


def test_add_partitions_and_delete(console: Console) -> None:
    console.post("/topics", {"name": "grow-t", "partitions": "1", "replication_factor": "1"})
    assert console.post("/topics/grow-t/partitions", {"total": "3"}).status_code == 303
    assert "3 partition(s)" in console.get("/topics/grow-t").text
    assert console.post("/topics/grow-t/delete").status_code == 303
    assert console.get("/topics/grow-t").status_code == 404


def test_bad_input_is_a_page_with_the_error_not_a_crash(console: Console) -> None:
    r = console.post("/topics", {"name": "bad-rf", "partitions": "1", "replication_factor": "9"})
    assert r.status_code == 502 and "replication factor" in html.unescape(r.text).lower()
    r = console.post("/topics", {"name": "x", "partitions": "two"})
    assert r.status_code == 400 and "whole number" in r.text
    assert console.get("/topics/no-such-topic").status_code == 404


def test_overview_lists_zookeeper_members_and_their_modes(broker: object, zookeeper: object) -> None:
    for c in make_console(ConsoleSettings(broker.bootstrap,            # type: ignore[attr-defined]
                                          zookeeper=f"{zookeeper.hosts},127.0.0.1:1/chroot",  # type: ignore[attr-defined]
                                          lag_sample_interval_s=0)):
        zk = c.get("/").text.split('id="zookeeper"')[1].split("</table>")[0]
        assert f"<td>{zookeeper.hosts}</td><td>standalone</td>" in zk     # type: ignore[attr-defined]
        assert "<td>127.0.0.1:1</td><td>down</td>" in zk


def test_summary_counts_down_brokers_under_replicated_and_offline() -> None:
    parts = {0: PartitionMetadata(0, 1, 0, [1, 2], [1], [], ErrorCode.NONE),
             1: PartitionMetadata(1, -1, 0, [2], [], [2], ErrorCode.LEADER_NOT_AVAILABLE),
             2: PartitionMetadata(2, 1, 0, [1], [1], [], ErrorCode.NONE)}
    md = ClusterMetadata({1: ("h", 9, None)}, 1, "cid", {"t": TopicMetadata("t", ErrorCode.NONE, False, parts)})
    brokers, topics, partitions, under, offline = summarise(md)
    assert [(b.broker_id, b.up, b.controller) for b in brokers] == [(1, True, True), (2, False, False)]
    assert (topics, partitions, under, offline) == (1, 3, 1, 1)
    assert Overview("cid", 1, brokers, topics, partitions, under, offline, []).health == "unavailable"
    assert Overview("cid", 1, brokers, topics, partitions, under, 0, []).health == "degraded"


def test_a_topics_page_view_costs_one_metadata_request_whatever_the_partitions(broker: object) -> None:
    """The scale contract: one Metadata request and one DescribeLogDirs per broker per page view
    (never a request per partition), here with 300 partitions over 3 topics."""
    ctx = ConsoleContext(ConsoleSettings(broker.bootstrap))              # type: ignore[attr-defined]
    try:
        ctx.call(lambda admin: admin.create_topics([NewTopic(f"scale-{i}", 100, 1) for i in range(3)]))
        sent: list[ApiKey] = []
        real = ctx.client.send

        def counting(node: Any, api_key: ApiKey, body: Any, **kw: Any) -> Any:
            sent.append(api_key)
            return real(node, api_key, body, **kw)
        ctx.client.send = counting                                      # type: ignore[method-assign]
        page = TopicsService(ctx).page("scale-", 1, 2)
        assert [r.name for r in page.rows] == ["scale-0", "scale-1"] and page.total == 3
        assert [r.partitions for r in page.rows] == [100, 100] and all(r.size_bytes == 0 for r in page.rows)
        assert sent == [ApiKey.METADATA, ApiKey.DESCRIBE_LOG_DIRS]
    finally:
        ctx.close()
