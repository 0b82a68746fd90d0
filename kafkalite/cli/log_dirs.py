"""kafkalite-log-dirs: the log dirs of brokers and the replicas in them, like kafka-log-dirs.sh.

``--describe --bootstrap-server B [--broker-list 1,2] [--topic-list t1,t2]`` sends DescribeLogDirs
(API 35) to each broker (all of them without ``--broker-list``) and prints Kafka's two status
lines and then Kafka's JSON document::

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
      "partitions":[{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}

``error`` is the Java exception class Kafka's tool names for the dir's error code (an offline dir:
``org.apache.kafka.common.errors.KafkaStorageException``), null when the dir is online. An empty
``--topic-list`` means every topic, as in Kafka.
"""
from __future__ import annotations

import json
from typing import Any

from kafkalite.client import Admin
from kafkalite.errors import ErrorCode

from .common import ToolError, bootstrap_arg, command_config, parser, run

#: error code -> the exception class Kafka's AdminClient raises for it (what kafka-log-dirs.sh prints)
EXCEPTION_NAMES = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "org.apache.kafka.common.errors.UnknownServerException",
}


def build_parser():
    p = parser("kafkalite-log-dirs", "Query brokers for their log directories and the replicas in them.")
    bootstrap_arg(p)
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the specified log directories on the specified brokers")
    p.add_argument("--broker-list", metavar="ID[,ID...]", default="",
                   help="brokers to query (default: every broker in the cluster)")
    p.add_argument("--topic-list", metavar="TOPIC[,TOPIC...]", default="",
                   help="topics whose replicas are listed (default: every topic)")
    return p


def broker_ids(text: str) -> list[int] | None:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        return None
    try:
        return sorted(set(int(s) for s in items))
    except ValueError:
        raise ToolError(f"--broker-list must be comma-separated broker ids, got {text!r}") from None


def error_name(code: int) -> str | None:
    if code == 0:
        return None
    try:
        known = ErrorCode(code)
    except ValueError:
        return f"error code {code}"
    return EXCEPTION_NAMES.get(known, known.name)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    brokers = broker_ids(args.broker_list)
    topics = [t.strip() for t in args.topic_list.split(",") if t.strip()] or None
    print("Querying brokers for log directories information")
    with Admin(args.bootstrap_server, **command_config(args, "kafkalite-log-dirs")) as admin:
        described = admin.describe_log_dirs(brokers, topics)
    print(f"Received log directory information from brokers {','.join(map(str, described))}")
    doc: dict[str, Any] = {"version": 1, "brokers": [{
        "broker": broker,
        "logDirs": [{
            "logDir": d.path,
            "error": error_name(d.error_code),
            "partitions": [{"partition": f"{r.partition.topic}-{r.partition.partition}", "size": r.size,
                            "offsetLag": r.offset_lag, "isFuture": r.is_future}
                           for r in sorted(d.replicas)],
        } for d in dirs],
    } for broker, dirs in described.items()]}
    print(json.dumps(doc, separators=(",", ":")))
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
