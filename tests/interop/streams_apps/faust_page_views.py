"""faust-streaming's windowed page-view count, as its documentation writes it, run against kafkalite.

Started by tests/interop/test_interop_faust.py as ``python faust_page_views.py worker -l info``
with FAUST_BROKER (``kafka://host:port,...``), FAUST_DATADIR and FAUST_OUTPUT in the environment:
a Table with a one-hour tumbling window (and its changelog topic), an agent that regroups the
page views by page id and counts them, forwarding each new count to FAUST_OUTPUT so a test can
read what the table holds. ``faust worker`` stops cleanly on SIGTERM.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import faust


class PageView(faust.Record):
    id: str
    user: str


app = faust.App(
    "page_views",
    broker=os.environ["FAUST_BROKER"],
    datadir=os.environ["FAUST_DATADIR"],
    store="memory://",
    topic_partitions=3,
    web_enabled=False,
)
page_view_topic = app.topic("page_views", value_type=PageView)
counts_topic = app.topic(os.environ["FAUST_OUTPUT"], value_serializer="json")
page_views = app.Table("page_views", default=int).tumbling(timedelta(hours=1), expires=timedelta(hours=2))


@app.agent(page_view_topic)
async def count_page_views(views: Any) -> None:
    async for view in views.group_by(PageView.id):
        page_views[view.id] += 1
        await counts_topic.send(key=view.id, value={"id": view.id, "count": page_views[view.id].current()})


if __name__ == "__main__":
    app.main()
