"""The message browser (bounded reads, start points, decoding, search, read_committed) and the
produce form, over a real broker; hostile record contents are shown escaped."""
from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalite.client import Producer
from kafkalite.client.admin import Admin, NewTopic
from kafkalite.console.context import ConsoleContext
from kafkalite.console.decoding import Decoder
from kafkalite.console.services.messages import BadRequest, BrowseRequest, MessagesService, ProduceRequest
from kafkalite.console.settings import ConsoleSettings

from .conftest import Console


def make_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with Admin(bootstrap) as admin:
        assert admin.create_topics([NewTopic(name, partitions, 1)])[name] is None


@pytest.fixture(scope="module")
def service(broker: Any) -> Any:
    ctx = ConsoleContext(ConsoleSettings(broker.bootstrap))
    svc = MessagesService(ctx, Decoder(None))
    yield svc
    ctx.close()


def test_browse_is_bounded_from_each_start_point(service: MessagesService, broker: Any) -> None:
    make_topic(broker.bootstrap, "browse-t")
    with Producer(broker.bootstrap) as p:
        for i in range(100):
            p.send("browse-t", f"value-{i}".encode(), f"k{i}".encode(), partition=0, timestamp_ms=1_000_000 + i)
    end = service.browse(BrowseRequest("browse-t", limit=10))
    assert [r.offset for r in end.rows] == list(range(90, 100)) and end.scanned == 10
    begin = service.browse(BrowseRequest("browse-t", start="beginning", limit=5))
    assert [r.value.text for r in begin.rows] == [f"value-{i}" for i in range(5)] and begin.scanned == 5
    at = service.browse(BrowseRequest("browse-t", start="offset", offset=42, limit=3))
    assert [r.offset for r in at.rows] == [42, 43, 44]
    ts = service.browse(BrowseRequest("browse-t", start="timestamp", timestamp_ms=1_000_070, limit=2))
    assert [r.offset for r in ts.rows] == [70, 71]
    found = service.browse(BrowseRequest("browse-t", start="beginning", search="value-77", window=100))
    assert [r.offset for r in found.rows] == [77] and found.scanned == 100
    # the search window bounds the read: value-77 lies beyond the first 50 records
    assert service.browse(BrowseRequest("browse-t", start="beginning", search="value-77", window=50)).rows == []


def test_a_window_larger_than_one_poll_loses_nothing(service: MessagesService, broker: Any) -> None:
    """One fetch brings more records than one poll returns: every one of them is read."""
    make_topic(broker.bootstrap, "wide-t")
    with Producer(broker.bootstrap, linger_ms=20) as p:
        for i in range(2500):
            p.send("wide-t", b"r%d" % i, partition=0)
    found = service.browse(BrowseRequest("wide-t", start="beginning", search="r2499", window=2500))
    assert found.scanned == 2500 and [r.offset for r in found.rows] == [2499] and found.complete


def test_decoding_json_text_hex_and_headers(service: MessagesService, broker: Any) -> None:
    make_topic(broker.bootstrap, "decode-t")
    with Producer(broker.bootstrap) as p:
        p.send("decode-t", json.dumps({"a": 1}).encode(), b"k", headers=[("h", b"v")])
        p.send("decode-t", b"\xff\x00\x01", None)
    rows = service.browse(BrowseRequest("decode-t", start="beginning")).rows
    assert rows[0].value.format == "json" and '"a": 1' in rows[0].value.text
    assert rows[0].key.text == "k" and rows[0].headers[0][0] == "h" and rows[0].headers[0][1].text == "v"
    assert rows[1].value.format == "hex" and rows[1].value.text == "ff 00 01" and rows[1].key.format == "null"
    forced = service.browse(BrowseRequest("decode-t", start="beginning", value_format="hex")).rows
    assert forced[0].value.format == "hex"
    asked_json = service.browse(BrowseRequest("decode-t", start="beginning", value_format="json")).rows
    assert asked_json[1].value.format == "hex" and asked_json[1].value.error.startswith("not json")


def test_read_committed_hides_an_open_transaction(service: MessagesService, broker: Any) -> None:
    make_topic(broker.bootstrap, "txn-t")
    with Producer(broker.bootstrap) as p:
        p.send("txn-t", b"plain")
    tx = Producer(broker.bootstrap, transactional_id="console-txn")
    try:
        tx.init_transactions()
        tx.begin_transaction()
        tx.send("txn-t", b"uncommitted")
        tx.flush()
        committed = service.browse(BrowseRequest("txn-t", start="beginning", read_committed=True)).rows
        uncommitted = service.browse(BrowseRequest("txn-t", start="beginning")).rows
        assert [r.value.text for r in committed] == ["plain"]
        assert [r.value.text for r in uncommitted] == ["plain", "uncommitted"]
        tx.abort_transaction()
    finally:
        tx.close()


def test_produce_and_bad_requests(service: MessagesService, broker: Any) -> None:
    make_topic(broker.bootstrap, "produce-t", partitions=2)
    partition, offset = service.produce(ProduceRequest("produce-t", "hello", "key-1", "trace: abc\nx: y", 1))
    assert (partition, offset) == (1, 0)
    row = service.browse(BrowseRequest("produce-t", partition=1, start="beginning")).rows[0]
    assert (row.key.text, row.value.text, [(n, v.text) for n, v in row.headers]) == \
        ("key-1", "hello", [("trace", "abc"), ("x", "y")])
    with pytest.raises(BadRequest, match="header line 1"):
        service.produce(ProduceRequest("produce-t", "v", headers="no colon here"))
    with pytest.raises(BadRequest, match="schema registry"):
        service.produce(ProduceRequest("produce-t", "{}", value_format="avro"))
    with pytest.raises(BadRequest, match="no partition 7"):
        service.browse(BrowseRequest("produce-t", partition=7))
    with pytest.raises(BadRequest, match="limit"):
        BrowseRequest("produce-t", limit=100000)


def test_hostile_record_is_escaped_in_the_page(console: Console, broker: Any) -> None:
    make_topic(broker.bootstrap, "xss-t")
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    with Producer(broker.bootstrap) as p:
        p.send("xss-t", evil.encode(), evil.encode(), headers=[(evil, evil.encode())])
    page = console.get("/topics/xss-t/messages?start=beginning")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert page.text.count(escaped) >= 4           # key, value, header name, header value
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_produce_form_redirects_to_the_record(console: Console, broker: Any) -> None:
    make_topic(broker.bootstrap, "form-t")
    r = console.post("/topics/form-t/produce", {"key": "k", "value": "from the form", "headers": "a: b",
                                                "partition": "0", "value_format": "text"})
    assert r.status_code == 303 and r.headers["location"].endswith("partition=0&start=offset&offset=0")
    page = console.get(r.headers["location"])
    assert "from the form" in page.text and "record written to form-t partition 0 at offset 0" in page.text
