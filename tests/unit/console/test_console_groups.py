"""Consumer groups over a real broker: list, detail with lag per partition and in total, the lag
history and its chart, offset resets (dry run, refused while active, committed when inactive),
deletion."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.client import Consumer, Producer
from kafkalite.client.admin import Admin, NewTopic
from kafkalite.console.context import ConsoleContext
from kafkalite.console.services.groups import GroupError, GroupsService, LagHistory
from kafkalite.console.settings import ConsoleSettings

from .conftest import Console


@pytest.fixture(scope="module")
def service(broker: Any) -> Any:
    ctx = ConsoleContext(ConsoleSettings(broker.bootstrap))
    yield GroupsService(ctx)
    ctx.close()


def fill(bootstrap: str, topic: str, n: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    with Producer(bootstrap) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, partition=i % 2)


def consume(bootstrap: str, group: str, topic: str, count: int) -> Consumer:
    c = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                 session_timeout_ms=6000, heartbeat_interval_ms=500)
    c.subscribe([topic])
    got = 0
    while got < count:
        got += len(c.poll(1000, max_records=count - got))
    c.commit()
    return c


def test_lag_members_and_reset_of_an_inactive_group(service: GroupsService, broker: Any) -> None:
    fill(broker.bootstrap, "lag-t", 10)
    c = consume(broker.bootstrap, "lag-g", "lag-t", 4)
    try:
        d = service.detail("lag-g")
        assert d.description.state == "Stable" and len(d.description.members) == 1
        assert d.total_lag == 6 and {p.partition.partition for p in d.lags} == {0, 1}
        assert all(p.owner for p in d.lags)
        with pytest.raises(GroupError, match="Stable with 1 member"):
            service.plan_reset("lag-g", "earliest")
    finally:
        c.close(autocommit=False)
    plan = service.plan_reset("lag-g", "latest")
    assert [(r.partition.partition, r.target) for r in plan] == [(0, 5), (1, 5)]
    assert service.detail("lag-g").total_lag == 6                 # a dry run commits nothing
    service.reset("lag-g", "latest")
    assert service.detail("lag-g").total_lag == 0
    service.reset("lag-g", "exact", "lag-t", 2)
    assert service.detail("lag-g").total_lag == 6
    assert [p for _, p in service.history.series("lag-g")][-3:] == [6, 0, 6]
    with pytest.raises(GroupError, match="needs a value"):
        service.plan_reset("lag-g", "timestamp")
    service.delete("lag-g")
    assert "lag-g" not in [g.group_id for g in service.groups()]


def test_lag_history_keeps_the_newest_points() -> None:
    h = LagHistory(points=3)
    for i in range(5):
        h.add("g", i, at=float(i))
    assert h.series("g") == [(2.0, 2), (3.0, 3), (4.0, 4)]


GID = "<b>page/g</b>"
URL = "/group?id=%3Cb%3Epage%2Fg%3C%2Fb%3E"


def test_group_pages(console: Console, broker: Any) -> None:
    fill(broker.bootstrap, "page-t", 6)
    consume(broker.bootstrap, GID, "page-t", 6).close(autocommit=False)
    listing = console.get("/groups").text
    assert "&lt;b&gt;page/g&lt;/b&gt;" in listing and "<b>page/g</b>" not in listing
    page = console.get(URL)
    assert page.status_code == 200 and 'id="total-lag">0<' in page.text and "<svg" in page.text
    fragment = console.get(URL.replace("/group?", "/group/lag?"))
    assert fragment.text.lstrip().startswith('<div id="lag"') and "<html" not in fragment.text
    dry = console.post("/group/reset", {"group_id": GID, "strategy": "earliest", "dry_run": "1"})
    assert dry.status_code == 200 and 'id="plan"' in dry.text
    assert 'id="total-lag">0<' in console.get(URL).text
    done = console.post("/group/reset", {"group_id": GID, "strategy": "earliest"})
    assert done.status_code == 303
    assert 'id="total-lag">6<' in console.get(URL).text
    assert console.post("/group/delete", {"group_id": GID}).status_code == 303
    assert console.get(URL).status_code == 404
