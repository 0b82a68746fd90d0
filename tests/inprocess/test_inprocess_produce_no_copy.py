"""A produced batch goes from the request frame to the segment file without a copy in Python
(issue 33, "batches validated and appended without intermediate bytes objects"): the one
``pwrite`` of the batch gets a view of the frame's own buffer, and the CRC check a view too. A
``bytes(records)`` anywhere between the connection and the file would make this fail."""
from __future__ import annotations

import os
from typing import Any

import pytest

from kafkalite.records import batch as batch_module
from tests.support.inprocess import produce_body, records

PRODUCE = 0
TOPIC = "no-copy"


def test_the_batch_reaches_the_file_as_a_view_of_the_request_frame(inprocess_cluster_factory: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = inprocess_cluster_factory(1)
    cluster.create_topic(TOPIC, 1, 1)
    leader = cluster.leader_of(TOPIC, 0)
    batch = records([os.urandom(1000) for _ in range(20)])
    writes: list[Any] = []
    checked: list[Any] = []
    real_pwrite, real_crc = os.pwrite, batch_module.crc32c

    def pwrite(fd: int, data: Any, position: int) -> int:
        if len(data) == len(batch):
            writes.append(data.obj if isinstance(data, memoryview) else data)
        return real_pwrite(fd, data, position)

    def crc(data: Any, value: int = 0) -> int:
        if len(data) == len(batch) - 21:       # a batch's CRC covers it from its attributes on
            checked.append(data)
        return real_crc(data, value)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(batch_module, "crc32c", crc)
    client = cluster.client(leader)
    resp = client.request(PRODUCE, 8, produce_body(TOPIC, {0: batch}, acks=1))
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert cluster.partition(leader, TOPIC, 0).log_end_offset == 20
    # one write of the batch, from the buffer the whole request frame was received into
    assert len(writes) == 1 and type(writes[0]) is bytearray and len(writes[0]) > len(batch)
    assert len(checked) == 1 and isinstance(checked[0], memoryview) and checked[0].obj is writes[0]
