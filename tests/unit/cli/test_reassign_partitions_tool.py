"""kafkalite-reassign-partitions without a cluster: Kafka's JSON formats and their one-line
errors, --generate's placement, and what --execute/--verify/--cancel/--list print (an Admin
stand-in answers as the controller would)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import reassign_partitions as tool
from kafkalite.cli.common import ToolError
from kafkalite.client.admin import PartitionReassignment
from kafkalite.client.cluster import ClusterMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from kafkalite.client.errors import ClientError
from kafkalite.errors import ErrorCode

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "f.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_plan_round_trips_in_kafkas_format(tmp_path: Path) -> None:
    """plan_json writes Kafka's compact format with log_dirs "any"; read_plan reads it back."""
    text = tool.plan_json({TP1: [3, 1], TP0: [1, 2]})
    assert text == ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"t","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}')
    assert tool.read_plan(write(tmp_path, text)) == {TP0: [1, 2], TP1: [3, 1]}


@pytest.mark.parametrize("doc, message", [
    ("{nope", "not valid JSON"),
    ({"version": 1, "partitions": []}, "cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "Duplicate replica"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                   {"topic": "t", "partition": 0, "replicas": [2]}]}, "Duplicate reassignment"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["d", "any"]}]},
     "must be \"any\" or an absolute path"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d"]}]},
     "different from size of log dirs"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}, "invalid partition entry"),
    ({"version": 2, "partitions": []}, "expected"),
])
def test_bad_plans_are_one_line_errors(tmp_path: Path, doc: Any, message: str) -> None:
    """Each malformed plan is a ToolError naming the problem."""
    with pytest.raises(ToolError, match=message):
        tool.read_plan(write(tmp_path, doc))


class FakeClient:
    def __init__(self, assignment: dict[TopicPartition, list[int]], brokers: dict[int, str | None]) -> None:
        self.assignment = assignment
        self.brokers = brokers

    def metadata(self, topics: list[str] | None = None) -> ClusterMetadata:
        out: dict[str, TopicMetadata] = {}
        for name in topics or []:
            parts = {tp.partition: PartitionMetadata(tp.partition, r[0], 0, r, r, [], ErrorCode.NONE)
                     for tp, r in self.assignment.items() if tp.topic == name}
            out[name] = TopicMetadata(name, ErrorCode.NONE if parts else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      False, parts)
        return ClusterMetadata({b: ("h", 1, rack) for b, rack in self.brokers.items()}, 1, "c", out)


class FakeAdmin:
    """Answers as the controller would for a topic t with partitions 0 and 1."""

    def __init__(self, ongoing: dict[TopicPartition, PartitionReassignment] | None = None) -> None:
        self.client = FakeClient({TP0: [1, 2], TP1: [2, 3]}, {1: None, 2: None, 3: None, 4: None})
        self.ongoing = ongoing or {}
        self.altered: list[dict] = []

    def list_partition_reassignments(self, partitions: Any = None, timeout_ms: int | None = None) -> dict:
        return {tp: r for tp, r in self.ongoing.items() if partitions is None or tp in partitions}

    def alter_partition_reassignments(self, targets: dict, timeout_ms: int | None = None) -> dict:
        self.altered.append(dict(targets))
        return {tp: (None if tp in self.ongoing or r is not None else
                     ClientError.from_code(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{tp.topic}-{tp.partition}"))
                for tp, r in targets.items()}


def test_generate_keeps_partition_count_and_rf_and_uses_only_listed_brokers() -> None:
    """Two partitions of RF 2 over brokers [2,4]: each partition gets both, leaders spread; an
    unknown broker in --broker-list is refused."""
    client = FakeClient({TP0: [1, 2], TP1: [2, 3]}, {1: None, 2: None, 3: None, 4: None})
    current, proposed = tool.generate(client, ["t"], [2, 4], rack_aware=True)
    assert current == {TP0: [1, 2], TP1: [2, 3]}
    assert set(proposed) == {TP0, TP1}
    assert all(sorted(r) == [2, 4] for r in proposed.values())
    assert {r[0] for r in proposed.values()} == {2, 4}
    with pytest.raises(ToolError, match="not known: 9"):
        tool.generate(client, ["t"], [2, 9], rack_aware=True)


def test_execute_prints_the_rollback_plan_and_refuses_while_others_run(capsys: Any) -> None:
    """--execute prints the current assignment of the planned partitions, then starts them; with a
    reassignment already running it refuses unless --additional."""
    admin = FakeAdmin()
    tool.execute(admin, {TP0: [4, 2]}, additional=False, timeout_ms=1000)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert out.startswith("Current partition replica assignment\n\n" + tool.plan_json({TP0: [1, 2]}) + "\n\n"
                          "Save this to use as the --reassignment-json-file option during rollback\n")
    assert "Successfully started partition reassignment for t-0" in out
    assert admin.altered == [{TP0: [4, 2]}]
    busy = FakeAdmin({TP1: PartitionReassignment([4, 2, 3], [4], [3])})
    with pytest.raises(ToolError, match="existing partition assignment"):
        tool.execute(busy, {TP0: [4, 2]}, additional=False, timeout_ms=1000)  # type: ignore[arg-type]
    tool.execute(busy, {TP0: [4, 2]}, additional=True, timeout_ms=1000)  # type: ignore[arg-type]
    assert busy.altered == [{TP0: [4, 2]}]


def test_verify_cancel_and_list_output(capsys: Any) -> None:
    """--verify: complete / still in progress / a different replica set; --cancel reports
    cancelled partitions and fails for one with nothing to cancel; --list prints Kafka's lines."""
    admin = FakeAdmin({TP1: PartitionReassignment([4, 2, 3], [4], [3])})
    assert not tool.verify(admin, {TP0: [1, 2], TP1: [4, 2]}, 1000)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "Reassignment of partition t-0 is complete." in out
    assert "Reassignment of partition t-1 is still in progress." in out
    assert not tool.verify(FakeAdmin(), {TP0: [3, 1]}, 1000)  # type: ignore[arg-type]
    assert "There is no active reassignment of partition t-0, but replica set is [1, 2] rather than [3, 1]." \
        in capsys.readouterr().out
    with pytest.raises(ToolError, match="t-0"):
        tool.cancel(admin, {TP0: [1, 2], TP1: [4, 2]}, 1000)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "Successfully cancelled partition reassignment for: t-1" in out
    assert "Error cancelling partition reassignment for t-0:" in out
    tool.list_ongoing(admin, 1000)  # type: ignore[arg-type]
    assert capsys.readouterr().out == "Current partition reassignments:\nt-1: replicas: 4,2,3. adding: 4. removing: 3.\n"
    tool.list_ongoing(FakeAdmin(), 1000)  # type: ignore[arg-type]
    assert capsys.readouterr().out == "No partition reassignments found.\n"
