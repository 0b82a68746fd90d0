"""kafkalite-consumer-groups: list, describe, reset offsets of and delete consumer groups,
like kafka-consumer-groups.sh (same options, same column layout)."""
from __future__ import annotations

import datetime as dt
import re

from kafkalite.client import Admin, ClientError, TopicPartition

from .common import ToolError, bootstrap_arg, command_config, parser, run


def build_parser():
    p = parser("kafkalite-consumer-groups", "List, describe, reset the offsets of, or delete consumer groups.")
    bootstrap_arg(p)
    actions = p.add_mutually_exclusive_group(required=True)
    for name in ("list", "describe", "reset-offsets", "delete"):
        actions.add_argument(f"--{name}", action="store_true")
    p.add_argument("--group", action="append")
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--members", action="store_true")
    p.add_argument("--state", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--topic", action="append", help="topic or topic:p0,p1 (for --reset-offsets)")
    p.add_argument("--all-topics", action="store_true")
    for name in ("to-earliest", "to-latest", "to-current"):
        p.add_argument(f"--{name}", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--shift-by", type=int)
    p.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone (Z, +01:00)")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--execute", action="store_true")
    return p


def table(rows: list[list[str]], header: list[str], fixed: dict[int, int]) -> list[str]:
    """Kafka's layout: left-aligned columns, each at least 15 wide (or its fixed width), last one free."""
    widths = []
    for i, h in enumerate(header[:-1]):
        if i in fixed:
            widths.append(fixed[i])
        else:
            widths.append(max([15, len(h)] + [len(r[i]) for r in rows]))
    lines = []
    for r in [header] + rows:
        lines.append(" ".join(f"{c:<{w}}" for c, w in zip(r[:-1], widths)) + " " + r[-1])
    return lines


def groups_of(a, admin: Admin) -> list[str]:
    if a.all_groups:
        return [g for g, _ in admin.list_groups()]
    if not a.group:
        raise ToolError("Option [--group] or [--all-groups] is required")
    return a.group


def describe(admin: Admin, group: str, a) -> None:
    desc = admin.describe_group(group)
    if desc.state == "Dead":
        raise ToolError(f"Consumer group '{group}' does not exist.")
    if a.state:
        host, port, _ = admin.client.cluster.brokers.get(desc.coordinator, ("-", -1, None))
        rows = [[group, f"{host}:{port} ({desc.coordinator})", desc.protocol or "", desc.state, str(len(desc.members))]]
        print()
        for line in table(rows, ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], {}):
            print(line)
        return
    if a.members:
        if not desc.members:
            print(f"\nConsumer group '{group}' has no active members.")
            return
        rows = [[group, m.member_id, m.host, m.client_id, str(len(m.assignment))] for m in desc.members]
        print()
        for line in table(rows, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], {}):
            print(line)
        return
    committed = admin.list_group_offsets(group)
    owner = {tp: m for m in desc.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    ends = {tp: o for tp, (o, _) in admin.client.list_offsets({tp: -1 for tp in tps}).items()} if tps else {}
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if cur is None or end is None else str(end - cur)
        m = owner.get(tp)
        rows.append([group, tp.topic, str(tp.partition), "-" if cur is None else str(cur),
                     "-" if end is None else str(end), lag, m.member_id if m else "-", m.host if m else "-",
                     m.client_id if m else "-"])
    if not desc.members:
        print(f"\nConsumer group '{group}' has no active members.")
    print()
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID"]
    for line in table(rows, header, {2: 10}):
        print(line)


def parse_datetime(text: str) -> int:
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)(Z|[+-]\d{2}:?\d{2})?", text)
    if not m:
        raise ToolError(f"Error parsing datetime {text!r}: expected format 'YYYY-MM-DDTHH:mm:SS.sss'")
    base = dt.datetime.fromisoformat(m.group(1))
    zone = m.group(2)
    if zone is None:
        base = base.astimezone()                   # local time, as Kafka uses the JVM default zone
    else:
        base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if zone == "Z" else zone))
    return int(base.timestamp() * 1000)


def reset_offsets(admin: Admin, group: str, a) -> None:
    chosen = [x for x in ("to_earliest", "to_latest", "to_current") if getattr(a, x)]
    chosen += [x for x in ("to_offset", "shift_by", "to_datetime") if getattr(a, x) is not None]
    if len(chosen) != 1:
        raise ToolError("Option [--reset-offsets] needs exactly one of --to-earliest, --to-latest, --to-current, "
                        "--to-offset, --shift-by, --to-datetime")
    if a.dry_run and a.execute:
        raise ToolError("Option [--dry-run] and [--execute] cannot be used together")
    desc = admin.describe_group(group)
    if a.execute and desc.state not in ("Empty", "Dead"):
        raise ToolError(f"Assignments can only be reset if the group '{group}' is inactive, but the current state "
                        f"is {desc.state}.")
    committed = admin.list_group_offsets(group)
    tps: list[TopicPartition] = []
    if a.all_topics:
        tps = sorted(committed)
    elif a.topic:
        for spec in a.topic:
            name, _, parts = spec.partition(":")
            if parts:
                tps += [TopicPartition(name, int(p)) for p in parts.split(",")]
            else:
                tps += [TopicPartition(name, p) for p in admin.client.partitions_for(name)]
    else:
        raise ToolError("Option [--reset-offsets] needs one of --topic or --all-topics")
    if not tps:
        print(f"\nConsumer group '{group}' has no committed offsets to reset.")
        return
    earliest = {tp: o for tp, (o, _) in admin.client.list_offsets({tp: -2 for tp in tps}).items()}
    latest = {tp: o for tp, (o, _) in admin.client.list_offsets({tp: -1 for tp in tps}).items()}

    def clamp(tp: TopicPartition, off: int) -> int:
        return max(earliest[tp], min(latest[tp], off))
    new: dict[TopicPartition, int] = {}
    if a.to_datetime is not None:
        ts = parse_datetime(a.to_datetime)
        found = admin.client.list_offsets({tp: ts for tp in tps})
    for tp in tps:
        cur = committed.get(tp)
        if a.to_earliest:
            new[tp] = earliest[tp]
        elif a.to_latest:
            new[tp] = latest[tp]
        elif a.to_current:
            new[tp] = cur if cur is not None else latest[tp]
        elif a.to_offset is not None:
            new[tp] = clamp(tp, a.to_offset)
        elif a.shift_by is not None:
            new[tp] = clamp(tp, (cur if cur is not None else latest[tp]) + a.shift_by)
        else:
            off = found[tp][0]
            new[tp] = latest[tp] if off < 0 else off
    if a.execute:
        admin.alter_group_offsets(group, new)
    print()
    rows = [[group, tp.topic, str(tp.partition), str(off)] for tp, off in sorted(new.items())]
    for line in table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], {2: 10}):
        print(line)


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    with Admin(a.bootstrap_server, **command_config(a, "kafkalite-consumer-groups")) as admin:
        if a.list:
            for g, _ in admin.list_groups():
                print(g)
            return 0
        groups = groups_of(a, admin)
        if a.describe:
            for g in groups:
                describe(admin, g, a)
            return 0
        if a.reset_offsets:
            for g in groups:
                reset_offsets(admin, g, a)
            return 0
        if a.delete:
            results = admin.delete_groups(groups)
            failed = {g: e for g, e in results.items() if e is not None}
            ok = [g for g, e in results.items() if e is None]
            if ok:
                print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
            if failed:
                print("Deletion of some consumer groups failed:")
                for g, e in failed.items():
                    print(f"* Group '{g}' could not be deleted due to: {e.code.name if e.code is not None else e}")
                return 1
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
