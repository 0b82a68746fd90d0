"""Raw record batches (a Fetch response's records blob) to Arrow record batches, columnar.

Spark's Kafka schema wants per-record key, value, offset and timestamp; the obvious path
(``kafkalite.records.iter_records`` -> Python lists -> ``pa.array``) spends about 2 µs per record in
Python. Here the only per-record Python is a walk over each record's *length* varint, which gives
every record's start; each field inside the records is then decoded for all records of the blob
at once with numpy gathers (varints decoded vectorised, 1-2 iterations in practice). Keys and
values never become Python objects: their (start, length) pairs become an Arrow ``binary_view``
array over the fetched bytes, and one C++ cast turns that into the ``binary`` column Spark checks
for (pyspark reference P11). Headers, rare in practice, are taken from
:func:`kafkalite.records.decode_batch` for the batches that have any, and only when asked for.

CRCs are checked (``scan_valid_prefix``) and every decoded position is checked against its record's
declared length, so a corrupt batch raises :class:`~kafkalite.errors.CorruptRecordError` instead of
producing garbage rows. Control batches (transaction markers) are skipped, as a consumer does.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided
import pyarrow as pa

from kafkalite.errors import CorruptRecordError
from kafkalite.records import decode_batch, decompress, scan_valid_prefix
from kafkalite.records.legacy import as_v2_batches, old_format_at
from kafkalite.records.batch import HEADER_SIZE, LOG_OVERHEAD, offset_and_length
from kafkalite.records.control import AbortedTransactionFilter
from kafkalite.records.varint import read_varint

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
       "timestampType int")
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"

_SCHEMAS: dict[bool, pa.Schema] = {}


def spark_ddl(include_headers: bool) -> str:
    """Spark's Kafka-source schema as DDL (``KafkaRecordToRowConverter``)."""
    return DDL + (HEADERS_DDL if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark maps :func:`spark_ddl` to (all nullable, timestamp[us, UTC])."""
    schema = _SCHEMAS.get(include_headers)
    if schema is None:
        fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                  ("partition", pa.int32()), ("offset", pa.int64()),
                  ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
        if include_headers:
            fields.append(("headers", HEADERS_TYPE))
        schema = _SCHEMAS[include_headers] = pa.schema(fields)
    return schema


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def convert(records: bytes | bytearray | memoryview, *, topic: str, partition: int, start: int, end: int,
            include_headers: bool = False,
            aborted: "tuple[tuple[int, int], ...] | None" = None) -> tuple[pa.RecordBatch | None, int]:
    """Rows for offsets in ``[start, end)`` from a fetched blob, and the next offset to fetch.

    ``aborted`` (read_committed): the Fetch answer's aborted transactions; their batches give no
    rows (``AbortedTransactionFilter``, the Java consumer's rule).

    The next offset is the one after the last complete batch in the blob (control batches
    included), or ``start`` when the blob holds no complete batch (a cut-off tail is normal in a
    Fetch response and ignored). Returns ``(None, next)`` when no record of the blob is in range.
    """
    data = records if type(records) is bytes else bytes(records)
    infos, good_end = scan_valid_prefix(memoryview(data))
    if good_end < len(data) and old_format_at(data, good_end):
        # v0/v1 entries of a topic on an older message format: as v2 batches, then as usual
        data = bytes(as_v2_batches(data))
        infos, good_end = scan_valid_prefix(memoryview(data))
    if good_end < len(data) and not _is_truncated_tail(data, good_end):
        raise CorruptRecordError(f"record batch at byte {good_end} of the fetch for {topic}-{partition} "
                                 "is corrupt (magic, length or CRC)")
    next_offset = start
    wanted = []
    skipper = AbortedTransactionFilter(aborted) if aborted is not None else None
    for info in infos:
        next_offset = max(next_offset, info.next_offset)
        if skipper is not None and skipper.skip(data, info):
            continue
        if info.is_control or info.next_offset <= start or info.base_offset >= end or info.records_count == 0:
            continue
        wanted.append(info)
    if not wanted:
        return None, next_offset

    # One byte array for all wanted batches: the fetched blob itself when nothing is compressed,
    # else the records areas (decompressed where needed) copied back to back.
    if any(info.compression for info in wanted):
        parts, areas, pos = [], [], 0
        for info in wanted:
            area: bytes | memoryview = memoryview(data)[info.position + HEADER_SIZE:info.end]
            if info.compression:
                area = decompress(info.compression, area)
            parts.append(area)
            areas.append((pos, pos + len(area)))
            pos += len(area)
        buf = b"".join(parts)
    else:
        buf = data
        areas = [(info.position + HEADER_SIZE, info.end) for info in wanted]

    ends: list[int] = []
    for info, (a, b) in zip(wanted, areas):
        _walk_lengths(buf, a, b, info.records_count, ends)
    return (_build(data, buf, wanted, areas, ends, topic, partition, start, end, include_headers),
            next_offset)


def _advance_table() -> list[int]:
    """Bytes from a record's start to the next record's, indexed by its first two bytes (little
    endian): 1- and 2-byte length varints, i.e. records under 8 KiB; 0 means "read it the long way"."""
    table = [0] * 65536
    for v in range(65536):
        b, b2 = v & 0xFF, v >> 8
        if b < 0x80:
            table[v] = 1 + ((b >> 1) ^ -(b & 1))
        elif b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            table[v] = 2 + ((u >> 1) ^ -(u & 1))
    return table


_ADVANCE = _advance_table()


def _walk_lengths(data: bytes, pos: int, end: int, count: int, ends: list[int]) -> None:
    """The only per-record Python loop: each record's length varint gives where it ends.

    One table lookup per record (about 30% faster than decoding the varint inline). Only the
    ends are kept; the starts and lengths are re-read vectorised in :func:`_build`, which also
    checks them (a negative length here is caught there or by the final position check).
    """
    if count < 0 or count > (end - pos) // 7:
        raise CorruptRecordError(f"record batch claims {count} records in a records area of {end - pos} bytes")
    add = ends.append
    advance = _ADVANCE
    try:
        for _ in range(count):
            step = advance[data[pos] | (data[pos + 1] << 8)]
            if step > 0:
                pos += step
            else:
                length, pos = read_varint(data, pos)
                pos += length
            add(pos)
    except IndexError:
        raise CorruptRecordError("record runs past the end of the records area") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left in a records area after its {count} records")


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints (up to 64 bits) starting at every ``pos``: values and the positions after."""
    b = arr.take(pos, mode="clip")
    u = (b & 0x7F).astype(np.uint64)
    more = b >= 0x80
    n = np.ones(len(pos), dtype=np.int64)
    shift = 7
    while more.any():
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")
        b = arr.take(pos + n, mode="clip")
        u |= np.where(more, (b & 0x7F).astype(np.uint64) << np.uint64(shift), np.uint64(0))
        n += more
        more &= b >= 0x80
        shift += 7
    values = ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)
    return values, pos + n


_ARANGE12 = np.arange(12, dtype=np.int64)


def _binary_column(arr: np.ndarray, buffer: pa.Buffer, starts: np.ndarray, lens: np.ndarray) -> pa.Array:
    """A ``binary`` column from (start, length) pairs into ``buffer``; length -1 is null.

    Builds Arrow ``binary_view`` views (16 bytes each: length, then 12 inline bytes or a 4-byte
    prefix, buffer 0 and the offset) with numpy, then lets Arrow's C++ cast copy the bytes. The
    12 bytes after each start are copied as rows of a strided window over the buffer (no index
    arithmetic per byte); starts in the buffer's last 12 bytes take the slow path.
    """
    n = len(starts)
    nulls = lens < 0
    lens = np.where(nulls, 0, lens)
    last = len(arr) - 12
    views = np.empty((n, 16), dtype=np.uint8)
    views[:, 0:4] = lens.astype("<i4").view(np.uint8).reshape(n, 4)
    if last >= 0:
        window = as_strided(arr, shape=(last + 1, 12), strides=(1, 1), writeable=False)
        rows = np.minimum(starts, last)
        views[:, 4:16] = window[rows]
        edge = rows != starts
    else:
        edge = np.ones(n, dtype=bool)
    if edge.any():
        views[edge, 4:16] = arr.take(starts[edge, None] + _ARANGE12, mode="clip")
    short = lens <= 12
    views[short, 4:16] *= (_ARANGE12 < lens[short, None])          # inline: zero past the length
    long_rows = ~short
    if long_rows.any():
        views[long_rows, 8:12] = 0                                  # buffer index 0
        views[long_rows, 12:16] = starts[long_rows].astype("<i4").view(np.uint8).reshape(-1, 4)
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little").tobytes()) if null_count else None
    view_array = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), buffer],
                                       null_count=null_count)
    return view_array.cast(pa.binary())


def _build(data: bytes, buf: bytes, infos: list, areas: list[tuple[int, int]], ends_l: list[int], topic: str,
           partition: int, start: int, end: int, include_headers: bool) -> pa.RecordBatch | None:
    arr = np.frombuffer(buf, dtype=np.uint8)
    counts_a = np.array([i.records_count for i in infos], dtype=np.int64)
    rec_end = np.array(ends_l, dtype=np.int64)
    heads = np.empty_like(rec_end)                      # where each record's length varint sits
    heads[1:] = rec_end[:-1]
    first = np.cumsum(counts_a) - counts_a              # index of each batch's first record
    heads[first] = [a for a, _ in areas]
    lengths, rec_start = _varints(arr, heads)
    if lengths.min() < 6 or not np.array_equal(rec_start + lengths, rec_end):
        raise CorruptRecordError(f"record lengths do not add up in a record batch of {topic}-{partition}")
    base_offset = np.repeat(np.array([i.base_offset for i in infos], dtype=np.int64), counts_a)
    base_ts = np.repeat(np.array([i.base_timestamp for i in infos], dtype=np.int64), counts_a)
    log_append = np.repeat(np.array([i.is_log_append_time for i in infos], dtype=bool), counts_a)
    max_ts = np.repeat(np.array([i.max_timestamp for i in infos], dtype=np.int64), counts_a)

    pos = rec_start + 1                                 # skip attributes
    ts_delta, pos = _varints(arr, pos)
    offset_delta, pos = _varints(arr, pos)
    key_len, pos = _varints(arr, pos)
    key_start = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(arr, pos)
    value_start = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, pos = _varints(arr, pos)
    if ((key_len < -1) | (value_len < -1) | (header_count < 0) | (pos > rec_end)
            | ((header_count == 0) & (pos != rec_end))).any():
        raise CorruptRecordError(f"record fields do not match their declared lengths in {topic}-{partition}")

    offsets = base_offset + offset_delta
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        idx = np.flatnonzero(keep)
        if len(idx) == 0:
            return None
        offsets, key_start, key_len, value_start, value_len = (
            offsets[idx], key_start[idx], key_len[idx], value_start[idx], value_len[idx])
        ts_delta, base_ts, log_append, max_ts, header_count = (
            ts_delta[idx], base_ts[idx], log_append[idx], max_ts[idx], header_count[idx])
    n = len(offsets)
    timestamps_ms = np.where(log_append, max_ts, base_ts + ts_delta)

    buffer = pa.py_buffer(buf)
    topic_bytes = topic.encode()
    topic_col = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer((np.arange(n + 1, dtype=np.int32) * len(topic_bytes)).tobytes()),
                         pa.py_buffer(topic_bytes * n)])
    columns = [
        _binary_column(arr, buffer, key_start, key_len),
        _binary_column(arr, buffer, value_start, value_len),
        topic_col,
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(timestamps_ms * 1000, pa.int64()).view(pa.timestamp("us", tz="UTC")),
        pa.array(log_append.astype(np.int32)),
    ]
    if include_headers:
        columns.append(_headers_column(data, infos, offsets, header_count))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _headers_column(data: bytes, infos: list, offsets: np.ndarray, header_count: np.ndarray) -> pa.Array:
    """Null for records without headers (as Spark does), else the list ``decode_batch`` reads.

    Only batches holding a record with headers are decoded, from the original fetched blob
    (``decode_batch`` decompresses by itself).
    """
    n = len(offsets)
    if not header_count.any():
        return pa.nulls(n, HEADERS_TYPE)
    values: list = [None] * n
    rows = np.flatnonzero(header_count)
    with_headers = offsets[rows]                     # ascending, as offsets are
    for info in infos:
        lo, hi = np.searchsorted(with_headers, [info.base_offset, info.last_offset + 1])
        if hi <= lo:
            continue
        row_of = {int(with_headers[j]): int(rows[j]) for j in range(lo, hi)}
        for rec in decode_batch(data, info, verify_crc=False):
            i = row_of.get(rec.offset)
            if i is not None:
                values[i] = [{"key": k, "value": v} for k, v in rec.headers]
    return pa.array(values, HEADERS_TYPE)


def _is_truncated_tail(data: bytes, pos: int) -> bool:
    """True when the bytes from ``pos`` are the start of a batch cut off by the fetch size."""
    remaining = len(data) - pos
    if remaining < LOG_OVERHEAD:
        return True
    _, size = offset_and_length(data, pos)
    return size >= HEADER_SIZE and size > remaining
