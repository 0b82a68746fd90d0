"""The Parquet sink under a real worker killed with SIGKILL while records are buffered: a new
worker resumes from the files already written (the sink rewinds the consumer through the
runtime's ``context.offset``), and every record ends up in exactly one file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kafkalite.client import Producer
from tests.support.waiting import wait_for

SCHEMA = {"type": "struct", "name": "position", "optional": False,
          "fields": [{"field": "seq", "type": "int64", "optional": False}]}


def _produce(bootstrap: str, seqs: range) -> None:
    with Producer(bootstrap) as producer:
        for seq in seqs:
            producer.send("pq-positions", json.dumps({"schema": SCHEMA, "payload": {"seq": seq}}).encode(),
                          partition=0)
        producer.flush(10)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if not p.name.startswith("."))


def _seqs(root: Path) -> list[int]:
    return sorted(s for f in _files(root) for s in pq.read_table(f).column("seq").to_pylist())


def test_parquet_sink_killed_with_buffered_records_writes_each_record_once(broker: Any, connect_factory: Any,
                                                                            tmp_path: Path) -> None:
    root = tmp_path / "lake"
    sink = {"name": "lake", "connector.class": "kafkalite.connect.connectors.parquet.ParquetSinkConnector",
            "topics": "pq-positions", "store.url": str(root), "flush.size": "10"}
    _produce(broker.bootstrap, range(25))
    first = connect_factory(broker.bootstrap, standalone=[sink])
    wait_for(lambda: len(_files(root)) == 2, timeout=60, what="two full files (5 records left buffered)")
    first.kill()
    assert _seqs(root) == list(range(20))
    _produce(broker.bootstrap, range(25, 40))
    connect_factory(broker.bootstrap, standalone=[sink])    # once the dead consumer's session ends
    wait_for(lambda: len(_files(root)) == 4, timeout=60, what="the buffered and new records in files")
    assert _seqs(root) == list(range(40))                    # each exactly once
    names = [f.name for f in _files(root)]
    assert names == [f"pq-positions+0+{start:010d}.parquet" for start in (0, 10, 20, 30)]
