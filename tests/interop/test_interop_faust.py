"""faust-streaming's windowed page-view count (a Table with a tumbling window and a changelog, an
agent regrouping by key) as a `faust worker` process on a three-broker kafkalite cluster, checked
against a plain-Python oracle, then stopped with SIGTERM."""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.interop.streams_support import APPS, start_app, stop_app, streams_python, tail
from tests.support.waiting import wait_for

IN, OUT = "page_views", "faust-page-view-counts"
CHANGELOG = "page_views-page_views-changelog"
VIEWS = [("home", "ann"), ("cart", "bob"), ("home", "cid"), ("faq", "ann"), ("home", "bob"),
         ("cart", "ann"), ("home", "dan"), ("faq", "cid"), ("cart", "dan"), ("home", "eve")]


def oracle(views: list[tuple[str, str]]) -> dict[str, list[int]]:
    """The running count of each page in its (single) window, in that page's order."""
    seen: Counter[str] = Counter()
    out: dict[str, list[int]] = {}
    for page, _user in views:
        seen[page] += 1
        out.setdefault(page, []).append(seen[page])
    return out


def test_faust_windowed_table_counts_page_views(cluster_factory: Any, tmp_path: Path) -> None:
    python = streams_python("faust")
    cluster = cluster_factory(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(IN, 3, 3), NewTopic(OUT, 3, 3)]).values():
        f.result(30)
    # every view in the current one-hour window (faust's windows are aligned on the epoch)
    hour_ms = int(time.time() * 1000) // 3_600_000 * 3_600_000
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i, (page, user) in enumerate(VIEWS):
        # keyed by user: faust's group_by must repartition them by page id
        p.produce(IN, key=user.encode(), value=json.dumps({"id": page, "user": user}).encode(),
                  timestamp=hour_ms + i)
    assert p.flush(30) == 0
    log = tmp_path / "faust.log"
    env_app = {"FAUST_BROKER": "kafka://" + cluster.bootstrap, "FAUST_DATADIR": str(tmp_path / "faust-data"),
               "FAUST_OUTPUT": OUT}
    app = start_app(python, [str(APPS / "faust_page_views.py"), "worker", "-l", "info"], log, tmp_path, env_app)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "faust-verifier",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([OUT])
    got: list[dict[str, Any]] = []

    def read() -> bool:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(json.loads(m.value()))
        return len(got) >= len(VIEWS) or app.poll() is not None

    try:
        wait_for(read, 55, "faust's counts")
        assert app.poll() is None, tail(log)
        counts: dict[str, list[int]] = {}
        for r in got:
            counts.setdefault(r["id"], []).append(r["count"])
        assert counts == oracle(VIEWS), tail(log)
        # the table's changelog: faust created it, and every update went through it
        res = ConfigResource(ConfigResource.Type.TOPIC, CHANGELOG)
        configs = admin.describe_configs([res])[res].result(30)
        assert "compact" in configs["cleanup.policy"].value
        parts = admin.list_topics(CHANGELOG, timeout=10).topics[CHANGELOG].partitions
        ends = [consumer.get_watermark_offsets(TopicPartition(CHANGELOG, q), timeout=10)[1] for q in parts]
        assert sum(ends) >= len(VIEWS), ends
    finally:
        consumer.close()
        rc = stop_app(app)
    assert rc == 0, tail(log)
    # the worker's clean shutdown: it left the group and closed its loop (not killed)
    assert "LeaveGroup request succeeded" in tail(log, 20000) and "Closing event loop" in tail(log), tail(log)
