"""kafkalite-delete-records: delete records before an offset, like kafka-delete-records.sh.

``--offset-json-file`` is Kafka's JSON: ``{"partitions": [{"topic": "t", "partition": 0,
"offset": 42}], "version": 1}`` (offset -1: up to the high watermark). DeleteRecords (API 21) goes
to each partition's leader and answers once every live replica's log starts there. Output lines
are Kafka's (``partition: t-0	low_watermark: 42`` or ``partition: t-0	error: ...``); unlike
Kafka's tool, the exit code is 1 when any partition failed, so scripts can tell.
"""
from __future__ import annotations

import json

from kafkalite.client import Admin
from kafkalite.client.cluster import TopicPartition

from .common import ToolError, bootstrap_arg, command_config, parser, run


def build_parser():
    p = parser("kafkalite-delete-records", "Delete records of partitions up to the given offsets.")
    bootstrap_arg(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='JSON {"partitions": [{"topic": "t", "partition": 0, "offset": 42}], "version": 1}')
    return p


def read_offsets(path: str) -> dict[TopicPartition, int]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version", 1) != 1:
        raise ToolError(f"{path}: expected a version 1 document")
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ..., "offset": ...}}]}}')
    out: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and isinstance(e.get("partition"), int)
                and isinstance(e.get("offset"), int) and not isinstance(e.get("offset"), bool)):
            raise ToolError(f"{path}: invalid partition entry {json.dumps(e)}")
        tp = TopicPartition(e["topic"], e["partition"])
        if tp in out:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        out[tp] = e["offset"]
    if duplicates:
        raise ToolError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    offsets = read_offsets(args.offset_json_file)
    print("Executing records delete operation")
    with Admin(args.bootstrap_server, **command_config(args, "kafkalite-delete-records")) as admin:
        results = admin.delete_records(offsets)
    print("Records delete operation completed:")
    failed = 0
    for tp in offsets:
        outcome = results[tp]
        if isinstance(outcome, int):
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {outcome}")
        else:
            failed += 1
            print(f"partition: {tp.topic}-{tp.partition}\terror: {outcome}")
    return 1 if failed else 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
