"""Regenerate the binary batch fixtures of this directory (see README.md).

Run from the repository root: ``.venv/bin/python tests/data/batches/make_fixtures.py``.
The expected records go to ``expected.json`` (bytes as hex, null as null) so the tests do not
depend on this script or on the libraries that wrote the batches.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import cramjam
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from kafkalite.records.crc import crc32c

HERE = Path(__file__).parent
T0 = 1_700_000_000_000
RECORDS = [
    (T0, b"user-1", b'{"clicks": 3}', [("content-type", b"application/json")]),
    (T0 + 12, None, b"no key here", []),
    (T0 - 4, b"user-2", None, [("tombstone", None)]),
    (T0 + 5, b"", b"x" * 400, [("a", b""), ("b", b"\x00\x01")]),
]


def _with(builder_cls, codec: int, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    b = builder_cls(magic=2, compression_type=codec, is_transactional=0, producer_id=producer[0],
                    producer_epoch=producer[1], base_sequence=producer[2], batch_size=1 << 20)
    for i, (ts, k, v, h) in enumerate(RECORDS):
        b.append(i, timestamp=ts, key=k, value=v, headers=h)
    return bytes(b.build())


def _raw_snappy_batch() -> bytes:
    """librdkafka's snappy form: the records area is raw snappy, no xerial framing."""
    plain = _with(KpBuilder, 0)
    area = bytes(cramjam.snappy.compress_raw(plain[61:]))
    body = bytearray(plain[21:61]) + area
    struct.pack_into(">h", body, 0, 2)   # attributes: snappy
    head = struct.pack(">qiiBI", 0, len(body) + 9, 0, 2, crc32c(bytes(body)))
    return head + bytes(body)


def main() -> None:
    files = {f"aiokafka_{name}.bin": _with(AioBuilder, codec)
             for codec, name in enumerate(["none", "gzip", "snappy_xerial", "lz4", "zstd"])}
    files["kafka_python_gzip_idempotent.bin"] = _with(KpBuilder, 1, (4242, 1, 17))
    files["librdkafka_style_raw_snappy.bin"] = _raw_snappy_batch()
    for name, data in files.items():
        (HERE / name).write_bytes(data)
    expected = [{"offset": i, "timestamp": ts, "key": None if k is None else k.hex(),
                 "value": None if v is None else v.hex(),
                 "headers": [[hk, None if hv is None else hv.hex()] for hk, hv in h]}
                for i, (ts, k, v, h) in enumerate(RECORDS)]
    (HERE / "expected.json").write_text(json.dumps({"files": sorted(files), "records": expected}, indent=1) + "\n")


if __name__ == "__main__":
    main()
