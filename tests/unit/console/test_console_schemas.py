"""Schema pages and Avro through the registry, over a real broker and a registry process: subjects,
versions, the diff, the compatibility check shown before registering, and Avro records produced
from the form and shown decoded."""
from __future__ import annotations

import html
import json
from typing import Any, Iterator

from kafkalite.client.admin import Admin, NewTopic
from kafkalite.console.settings import ConsoleSettings

from .conftest import Console, make_console

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                              {"name": "note", "type": "string", "default": ""}]})
BREAKING = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})


def registered_console(broker: Any, registry_factory: Any) -> Iterator[Console]:
    registry = registry_factory(broker.bootstrap)
    yield from make_console(ConsoleSettings(broker.bootstrap, registry_url=registry.url, lag_sample_interval_s=0))


def test_schema_pages_check_register_and_diff(broker: Any, registry_factory: Any) -> None:
    for console in registered_console(broker, registry_factory):
        first = console.post("/schemas/register", {"subject": "orders-value", "schema": V1})
        assert first.status_code == 200 and 'id="verdict" class="ok"' in first.text     # checked, not saved yet
        assert "orders-value" not in console.get("/schemas").text.split('id="subjects"')[1].split("</table>")[0]
        saved = console.post("/schemas/register", {"subject": "orders-value", "schema": V1, "confirm": "1"})
        assert saved.status_code == 303 and saved.headers["location"] == "/subject?name=orders-value"
        bad = console.post("/schemas/register", {"subject": "orders-value", "schema": BREAKING, "confirm": "1"})
        assert bad.status_code == 200 and "Not compatible" in bad.text and 'id="reasons"' in bad.text
        assert 'id="save"' not in bad.text                        # an incompatible schema cannot be saved
        console.post("/schemas/register", {"subject": "orders-value", "schema": V2, "confirm": "1"})
        page = console.get("/subject?name=orders-value&old=1&new=2").text
        assert 'id="level">BACKWARD<' in page
        diff = html.unescape(page.split('id="diff">')[1].split("</pre>")[0])
        assert '+      "name": "note",' in diff and "--- orders-value v1" in diff
        assert ">orders-value<" in console.get("/schemas").text

        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 1, 1)])
        r = console.post("/topics/orders/produce", {"value": '{"id": 42, "note": "<script>x</script>"}',
                                                    "value_format": "avro", "key": "o-42"})
        assert r.status_code == 303
        page = console.get("/topics/orders/messages?start=beginning").text
        value = html.unescape(page.split('class="value">')[1].split("</td>")[0])
        assert '"id": 42' in value and '"note": "<script>x</script>"' in value and "avro (schema id 2)" in value
        assert "<script>x</script>" not in page
        wrong = console.post("/topics/orders/produce", {"value": '{"id": "x"}', "value_format": "avro"})
        assert wrong.status_code == 400 and "not Avro JSON" in html.unescape(wrong.text)
