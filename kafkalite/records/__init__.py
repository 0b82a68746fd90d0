"""Record batch format v2: headers (batch), records (record, builder), varints, codecs, CRC-32C.

The names most callers need are re-exported here; the submodules hold the rest.
"""
from kafkalite.records.batch import (
    BatchInfo, assign_offsets, crc_ok, offset_and_length, read_header, scan_valid_prefix, set_log_append_time,
    validate_batches,
)
from kafkalite.records.builder import BatchBuilder, build_batch
from kafkalite.records.compression import Codec, compress, decompress
from kafkalite.records.control import ControlType, EndTxnMarker, build_end_txn_marker, parse_control_record
from kafkalite.records.crc import crc32c
from kafkalite.records.record import Record, decode_batch, iter_batches, iter_records

__all__ = [
    "BatchBuilder", "BatchInfo", "Codec", "ControlType", "EndTxnMarker", "Record", "assign_offsets",
    "build_batch", "build_end_txn_marker", "compress", "crc32c", "crc_ok", "decode_batch", "decompress",
    "iter_batches", "iter_records", "offset_and_length", "parse_control_record", "read_header",
    "scan_valid_prefix", "set_log_append_time", "validate_batches",
]
