"""kafkalite-transactions: find and inspect transactions, in the style of Kafka's kafka-transactions.sh.

Kafka's tool (3.0+) asks the brokers with ListTransactions, DescribeTransactions and
DescribeProducers, APIs Kafka 2.8 does not have. This tool uses only what 2.8 offers, over the
wire:

- ``list`` and ``describe --transactional-id ID`` read ``__transaction_state`` from its start to
  its end offsets (Fetch; the records are Kafka's TransactionLogKey/Value, ``kafkalite.txn.records``)
  and keep each id's latest state, i.e. the coordinator's last completed transition; the
  coordinator is the leader of the id's partition. An id being written (a pending transition)
  shows its previous state until the write completes.
- ``describe-producers --topic T --partition P`` replays the partition's batch headers from its log
  start to its high watermark (Fetch, read_uncommitted), as the leader's producer state is built:
  per producer id the epoch, last sequence and timestamp, the coordinator epoch of its last
  COMMIT/ABORT marker and the first offset of its open transaction. Unlike DescribeProducers it
  also lists producers the leader has already expired (``producer.id.expiration.ms``).

Output: Kafka's column names, tab-separated, one header line.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.errors import ErrorCode
from kafkalite.records.batch import scan_valid_prefix
from kafkalite.records.control import read_end_txn_marker
from kafkalite.records.record import decode_batch
from kafkalite.txn.records import decode as decode_txn_record
from kafkalite.txn.state import TransactionMetadata, TxnState

from .common import ArgumentParser, SharedOptions, ToolError, bootstrap_arg, command_config, run, verbose_arg

TXN_TOPIC = "__transaction_state"
EARLIEST, LATEST = -2, -1
FETCH_BYTES = 1 << 20


def _global_options(p: argparse.ArgumentParser) -> None:
    verbose_arg(p)
    bootstrap_arg(p)


#: --verbose, --bootstrap-server and --command-config, before or after the subcommand
GLOBAL_OPTIONS = SharedOptions(_global_options)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="kafkalite-transactions",
                       description="List and describe transactions and the producers of a partition.")
    sub = GLOBAL_OPTIONS.subcommands(p, dest="command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="list transactional ids, their coordinator, producer id and state")
    d = sub.add_parser("describe", help="describe the state of one transactional id")
    d.add_argument("--transactional-id", required=True)
    dp = sub.add_parser("describe-producers", help="describe the producers of one topic partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    return p


def read_partition(client: KafkaClient, tp: TopicPartition, start: int, end: int) -> list[tuple[Any, bytes]]:
    """Every batch header of ``tp`` in ``[start, end)`` with the bytes it sits in (Fetch, read_uncommitted)."""
    out: list[tuple[Any, bytes]] = []
    offset = start
    while offset < end:
        f = client.fetch(tp, offset, max_bytes=FETCH_BYTES, max_wait_ms=0)
        if f.error == ErrorCode.OFFSET_OUT_OF_RANGE and offset < f.log_start_offset:
            offset = f.log_start_offset      # retention or compaction moved the start meanwhile
            continue
        if f.error:
            raise ToolError(f"fetching {tp.topic}-{tp.partition} at offset {offset}: {ErrorCode(f.error).name}")
        data = bytes(f.records)
        infos, _ = scan_valid_prefix(data, 0, verify_crc=True)
        infos = [i for i in infos if i.next_offset > offset]
        if not infos:
            break                             # nothing more below the high watermark
        out.extend((i, data) for i in infos)
        offset = infos[-1].next_offset
    return out


def offsets(client: KafkaClient, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
    start = client.list_offsets({tp: EARLIEST for tp in tps})
    end = client.list_offsets({tp: LATEST for tp in tps})
    return {tp: (start[tp][0], end[tp][0]) for tp in tps}


def transaction_states(client: KafkaClient) -> dict[str, tuple[int, TransactionMetadata]]:
    """Transactional id -> (coordinator broker, latest persisted metadata), from ``__transaction_state``."""
    md = client.metadata([TXN_TOPIC])
    topic = md.topics.get(TXN_TOPIC)
    if topic is None or topic.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or not topic.partitions:
        return {}                             # no transactional producer has been seen yet
    tps = [TopicPartition(TXN_TOPIC, p) for p in sorted(topic.partitions)]
    out: dict[str, tuple[int, TransactionMetadata]] = {}
    for tp, (start, end) in offsets(client, tps).items():
        leader = topic.partitions[tp.partition].leader
        for info, data in read_partition(client, tp, start, end):
            if info.is_control or not info.records_count:
                continue
            for rec in decode_batch(data, info):
                if rec.key is None:
                    continue
                parsed = decode_txn_record(bytes(rec.key), None if rec.value is None else bytes(rec.value))
                if parsed is None:
                    continue
                if parsed.metadata is None or parsed.metadata.state == TxnState.DEAD:
                    out.pop(parsed.transactional_id, None)
                else:
                    out[parsed.transactional_id] = (leader, parsed.metadata)
    return out


def cmd_list(client: KafkaClient) -> list[list[str]]:
    rows = [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]]
    for txn_id, (coordinator, meta) in sorted(transaction_states(client).items()):
        rows.append([txn_id, str(coordinator), str(meta.producer_id), meta.state.display])
    return rows


def cmd_describe(client: KafkaClient, txn_id: str, now_ms: int) -> list[list[str]]:
    found = transaction_states(client).get(txn_id)
    if found is None:
        raise ToolError(f"transactional id {txn_id!r} not found (TRANSACTIONAL_ID_NOT_FOUND)")
    coordinator, meta = found
    start = meta.txn_start_timestamp
    ongoing = meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    return [["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
             "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
            [str(coordinator), txn_id, str(meta.producer_id), str(meta.producer_epoch), meta.state.display,
             str(meta.txn_timeout_ms), str(start) if start >= 0 and ongoing else "None",
             str(max(0, now_ms - start)) if start >= 0 and ongoing else "None",
             ",".join(f"{t}-{p}" for t, p in sorted(meta.partitions) if ongoing)]]


def cmd_describe_producers(client: KafkaClient, topic: str, partition: int) -> list[list[str]]:
    if partition not in client.partitions_for(topic):
        raise ToolError(f"partition {partition} of topic {topic} does not exist")
    tp = TopicPartition(topic, partition)
    start = client.list_offsets({tp: EARLIEST})[tp][0]
    end = client.fetch(tp, start, max_bytes=1, max_wait_ms=0).high_watermark
    # producer id -> [epoch, last sequence, last timestamp, coordinator epoch, open transaction's first offset]
    producers: dict[int, list[int]] = {}
    for info, data in read_partition(client, tp, start, end):
        pid = info.producer_id
        if pid < 0:
            continue
        entry = producers.setdefault(pid, [info.producer_epoch, -1, -1, -1, -1])
        if info.producer_epoch != entry[0]:
            entry[0], entry[1] = info.producer_epoch, -1     # a new epoch starts its sequences over
        entry[2] = info.max_timestamp
        if info.is_control:
            if info.records_count:             # an empty one is a marker the cleaner emptied
                entry[3] = read_end_txn_marker(data, info).coordinator_epoch
            entry[4] = -1
            continue
        if info.records_count:
            entry[1] = info.base_sequence + info.last_offset_delta if info.base_sequence >= 0 else -1
        else:
            entry[1] = info.last_sequence
        if info.is_transactional and entry[4] < 0:
            entry[4] = info.base_offset
    rows = [["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
             "CurrentTransactionStartOffset"]]
    for pid, (epoch, seq, ts, coord, first) in sorted(producers.items()):
        rows.append([str(pid), str(epoch), str(coord), str(seq), str(ts), str(first)])
    return rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    return GLOBAL_OPTIONS.parse_args(build_parser(), argv)


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    with KafkaClient(a.bootstrap_server, **command_config(a, "kafkalite-transactions")) as client:
        if a.command == "list":
            rows = cmd_list(client)
        elif a.command == "describe":
            rows = cmd_describe(client, a.transactional_id, int(time.time() * 1000))
        else:
            rows = cmd_describe_producers(client, a.topic, a.partition)
    for row in rows:
        print("\t".join(row))
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
