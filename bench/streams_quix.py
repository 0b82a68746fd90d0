"""Scenario 17's pipelines written with Quix Streams (run by ``.venv-streams/bin/python``, the
environment scripts/setup makes for the stream libraries; it imports nothing of kafkalite).

``python bench/streams_quix.py BOOTSTRAP filter|window IN OUT GROUP STATE_DIR [EXTRA_JSON]``

- ``filter``: records with ``speed > 50``, projected to ``{ID, TRUCK, KMH, PTS}`` (the SQL
  server's ``CREATE STREAM ... AS SELECT id, truck, speed * 1.609 AS kmh, pts ... WHERE speed > 50``);
- ``window``: per truck (the record key) and one-minute tumbling window on the ``pts`` field, count,
  average speed and the newest ``pts``, one update per input record (``.current()``, as ksqlDB's
  ``EMIT CHANGES``), written as ``{TRUCK, WINDOWSTART, N, AVG_SPEED, LAST_PTS}``.

Quix Streams' defaults otherwise (at-least-once, changelog topics, topics created by the
application), with ``commit_interval`` 1 s (the SQL server's trigger interval in the benchmark).
``EXTRA_JSON``: librdkafka settings for the consumer, the producer and the admin client (Kafka
0.9.0.1 needs ``api.version.request=false``). The line ``READY`` is printed once the app runs.
"""
from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

from quixstreams import Application


def main(argv: list[str]) -> int:
    bootstrap, kind, in_topic, out_topic, group, state_dir = argv[:6]
    extra: dict[str, Any] = json.loads(argv[6]) if len(argv) > 6 else {}
    app = Application(broker_address=bootstrap, consumer_group=group, auto_offset_reset="latest",
                      commit_interval=1.0, state_dir=state_dir, consumer_extra_config=extra,
                      producer_extra_config=extra, on_processing_error=None)
    source = app.topic(in_topic, value_deserializer="json",
                       timestamp_extractor=lambda value, headers, ts, ts_type: int(value["pts"]))
    sink = app.topic(out_topic, value_serializer="json")
    sdf = app.dataframe(source)
    if kind == "filter":
        sdf = sdf.filter(lambda v: v["speed"] > 50)
        sdf = sdf.apply(lambda v: {"ID": v["id"], "TRUCK": v["truck"], "KMH": v["speed"] * 1.609, "PTS": v["pts"]})
    else:
        sdf = sdf.tumbling_window(timedelta(minutes=1)).reduce(
            lambda agg, v: {"n": agg["n"] + 1, "sum": agg["sum"] + v["speed"], "last": max(agg["last"], v["pts"]),
                            "truck": v["truck"]},
            lambda v: {"n": 1, "sum": v["speed"], "last": v["pts"], "truck": v["truck"]}).current()
        sdf = sdf.apply(lambda w: {"TRUCK": w["value"]["truck"], "WINDOWSTART": w["start"], "N": w["value"]["n"],
                                   "AVG_SPEED": w["value"]["sum"] / w["value"]["n"], "LAST_PTS": w["value"]["last"]})
    sdf.to_topic(sink)
    print("READY", flush=True)
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
