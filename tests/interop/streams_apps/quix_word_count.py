"""Quix Streams' stateful word count, as its documentation writes it, run against kafkalite.

Started by tests/interop/test_interop_quixstreams.py as
``python quix_word_count.py BOOTSTRAP INPUT OUTPUT STATE_DIR``: an Application with the
exactly-once processing guarantee, a StreamingDataFrame whose ``.apply(..., stateful=True)`` keeps
each word's running count in RocksDB (backed by Quix's changelog topic), and its results produced
to OUTPUT as JSON. The process runs until SIGTERM, which Quix handles by closing cleanly.
"""
from __future__ import annotations

import logging
import sys
from typing import Any

from quixstreams import Application, State


def count_word(value: dict[str, Any], state: State) -> dict[str, Any]:
    """The documentation's counter: the per-key total lives in the state store."""
    total = state.get("total", default=0) + 1
    state.set("total", total)
    return {"word": value["word"], "count": total}


def main(bootstrap: str, input_topic: str, output_topic: str, state_dir: str) -> None:
    app = Application(
        broker_address=bootstrap,
        consumer_group="word-counter",
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        state_dir=state_dir,
        loglevel="INFO",
    )
    words = app.topic(input_topic, value_deserializer="json")
    counts = app.topic(output_topic, value_serializer="json")
    sdf = app.dataframe(words)
    sdf = sdf.apply(count_word, stateful=True)
    sdf.to_topic(counts)
    app.run()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(*sys.argv[1:5])
