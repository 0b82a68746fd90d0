"""kafkalite-leader-election: elect preferred or unclean leaders, like kafka-leader-election.sh.

Exactly one way to name the partitions: ``--topic`` with ``--partition``, ``--all-topic-partitions``,
or ``--path-to-json-file`` (``{"partitions": [{"topic": "t", "partition": 0}, ...]}``, the format
of Kafka's tool and of the old ``/admin/preferred_replica_election`` znode). The request is
ElectLeaders (API 43) to the controller. Output and exit code as Kafka's tool: the partitions
elected, those whose valid replica was already leader, then each failure; exit 1 if any failed.
"""
from __future__ import annotations

import json
from typing import Any

from kafkalite.client import Admin, ClientError
from kafkalite.client.admin import PREFERRED, UNCLEAN
from kafkalite.client.cluster import TopicPartition
from kafkalite.errors import ErrorCode

from .common import ToolError, bootstrap_arg, command_config, parser, properties, run

TYPES = {"preferred": PREFERRED, "unclean": UNCLEAN}


def build_parser():
    p = parser("kafkalite-leader-election", "Elect the preferred replica or an unclean leader for partitions.")
    bootstrap_arg(p)
    p.add_argument("--election-type", required=True, type=str.lower, choices=sorted(TYPES),
                   help='"preferred" (the first assigned replica, if in sync) or "unclean" (any live replica '
                        "for partitions without a leader)")
    p.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='JSON {"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.add_argument("--admin.config", dest="admin_config", metavar="FILE",
                   help="client properties (only request.timeout.ms is used)")
    return p


def read_json_partitions(path: str) -> list[TopicPartition]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ToolError(f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ...}}, ...]}}')
    out: list[TopicPartition] = []
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and isinstance(e.get("partition"), int)):
            raise ToolError(f"{path}: invalid partition entry {json.dumps(e)}")
        tp = TopicPartition(e["topic"], e["partition"])
        if tp in out:
            raise ToolError(f"Replica election data contains duplicate partitions: {tp.topic}-{tp.partition}")
        out.append(tp)
    if not out:
        raise ToolError(f"{path}: no partitions listed")
    return out


def _timeout_ms(args: Any) -> int | None:
    if not args.admin_config:
        return None
    try:
        with open(args.admin_config, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    except OSError as exc:
        raise ToolError(f"cannot read {args.admin_config}: {exc.strerror}") from None
    props = properties(lines, "admin config line")
    raw = props.get("request.timeout.ms")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ToolError(f"invalid request.timeout.ms {raw!r} in {args.admin_config}") from None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    ways = sum([args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None])
    if ways != 1:
        raise ToolError("One and only one of the following options is required: "
                        "--all-topic-partitions, --topic, --path-to-json-file")
    if (args.topic is None) != (args.partition is None):
        raise ToolError("--topic and --partition must be given together")
    partitions: list[TopicPartition] | None
    if args.all_topic_partitions:
        partitions = None
    elif args.path_to_json_file:
        partitions = read_json_partitions(args.path_to_json_file)
    else:
        partitions = [TopicPartition(args.topic, args.partition)]
    kind = args.election_type.upper()
    with Admin(args.bootstrap_server, **command_config(args, "kafkalite-leader-election")) as admin:
        results = admin.elect_leaders(TYPES[args.election_type], partitions, timeout_ms=_timeout_ms(args))
    succeeded = [tp for tp, err in results.items() if err is None]
    not_needed = [tp for tp, err in results.items() if err is not None and err.code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = {tp: err for tp, err in results.items() if err is not None and err.code != ErrorCode.ELECTION_NOT_NEEDED}

    def names(tps: list[TopicPartition]) -> str:
        return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))

    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions {names(succeeded)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {names(not_needed)}")
    if not succeeded and not not_needed and not failed:
        print(f"No partitions needed a leader election ({kind})")
    if failed:
        print(f"Error completing leader election ({kind}) for partitions {names(list(failed))}")
        for tp, err in sorted(failed.items()):
            print(f"Error completing leader election ({kind}) for partition: {tp.topic}-{tp.partition}: {err}")
        raise ClientError(f"{len(failed)} replica(s) could not be elected")
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
