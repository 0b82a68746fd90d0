"""A distributed Connect cluster of real worker processes on a real broker (and a real
PostgreSQL under a JDBC sink): connectors created through one worker run across all of them; a
worker killed with SIGKILL has its tasks reassigned to the survivors, every line reaches the
database exactly once, and the status topic tells who runs what."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from collections import Counter
from typing import Any

from kafkalite.client import Consumer, Producer, TopicPartition
from tests.support.topics import create_topic
from tests.support.waiting import wait_for


def _call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def _status_history(bootstrap: str, topic: str = "connect-status") -> dict[str, list[Any]]:
    """Every record of a Connect topic (the status topic by default), by key, in order."""
    out: dict[str, list[Any]] = {}
    with Consumer(bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in consumer.client.partitions_for(topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        end = consumer.end_offsets(tps)
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for r in consumer.poll(500):
                if r.key is not None and r.value is not None:
                    out.setdefault(r.key.decode(), []).append(json.loads(r.value))
    return out


def _status(url: str, name: str) -> Any:
    code, body = _call("GET", f"{url}/connectors/{name}/status")
    return body if code == 200 else None


def _all_running(url: str, name: str, tasks: int) -> Any:
    s = _status(url, name)
    if not s or s["connector"]["state"] != "RUNNING" or len(s["tasks"]) != tasks:
        return None
    return s if all(t["state"] == "RUNNING" for t in s["tasks"]) else None


def _pg_lines(postgres: Any) -> tuple[int, set[str]] | None:
    """(rows, distinct lines) of the sink's table; None before the sink has created it."""
    try:
        rows = postgres.execute("SELECT line FROM dist_lines")
    except Exception:  # noqa: BLE001 - the table does not exist yet
        return None
    return len(rows), {r[0] for r in rows}


def _lines(start: int, end: int) -> str:
    return "".join(f"line-{i}\n" for i in range(start, end))


def test_tasks_move_when_a_worker_is_killed_and_spread_when_one_joins(broker: Any, connect_factory: Any,
                                                                     postgres: Any, tmp_path: Path) -> None:
    """Three workers (incremental cooperative protocol with signed internal requests, sessioned,
    a 2 s scheduled rebalance delay): a file source and a JDBC sink with 6 tasks upserting into a
    real PostgreSQL (each line its own primary key), created through followers (task configs
    reach the config topic through the leader). SIGKILL of a worker running sink tasks while lines
    are being appended: after the session timeout and the delay its tasks RUN on the others
    (their status records name the new workers) and every line is in PostgreSQL exactly once (a
    replayed record is an upsert of the same row); a fourth worker joins and the work is spread
    evenly again."""
    create_topic(broker, "dist-lines", 3)
    props = {"connect.protocol": "sessioned", "scheduled.rebalance.max.delay.ms": "2000"}
    workers = [connect_factory(broker.bootstrap, **props) for _ in range(3)]
    url = workers[1].url
    source_file = tmp_path / "in.txt"
    source_file.write_text(_lines(0, 200))
    code, body = _call("POST", f"{url}/connectors", {"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": "dist-lines"}})
    assert code == 201, body
    assert body["name"] == "src" and body["config"]["file"] == str(source_file)
    # through two different workers: one at least is a follower, which forwards to the leader
    code, body = _call("POST", f"{workers[2].url}/connectors", {"name": "pg", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "tasks.max": "6",
        "topics": "dist-lines", "connection.url": postgres.jdbc_url, "table.name.format": "dist_lines",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "line", "auto.create": "true",
        "transforms": "row,offset",
        "transforms.row.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.row.field": "line",
        "transforms.offset.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.offset.offset.field": "kafka_offset"}})
    assert code == 201, body
    code, body = _call("POST", f"{url}/connectors", {"name": "pg", "config": {
        "connector.class": "FileStreamSink", "topics": "dist-lines"}})
    assert code == 409 and body["error_code"] == 409
    wait_for(lambda: _all_running(url, "src", 1), timeout=60, what="the source running")
    status = wait_for(lambda: _all_running(url, "pg", 6), timeout=60, what="the sink's 6 tasks running")
    owners = {t["worker_id"] for t in status["tasks"]}
    assert len(owners) >= 2, status                           # spread over the workers
    wait_for(lambda: (_pg_lines(postgres) or (0,))[0] >= 20, timeout=60, what="the first rows in PostgreSQL")
    # KIP-507: the leader's session key, Kafka's record; no internal request was refused
    [key] = _status_history(broker.bootstrap, "connect-configs")["session-key"][-1:]
    assert set(key) == {"key", "algorithm", "creation-timestamp"} and key["algorithm"] == "HmacSHA256"
    logs = "".join(w.log_path.read_text(errors="replace") for w in workers)
    assert "signature" not in logs, logs[-3000:]

    # kill -9 mid-stream: lines keep coming while the victim dies and its tasks move
    victim = next(w for w in workers if f"127.0.0.1:{w.port}" in owners)

    def append() -> None:
        for batch in range(20):
            with open(source_file, "a") as f:
                f.write(_lines(200 + batch * 10, 210 + batch * 10))
            time.sleep(0.1)
    writer = threading.Thread(target=append)
    writer.start()
    victim.kill()
    writer.join()
    survivors = [w for w in workers if w is not victim]
    victim_id = f"127.0.0.1:{victim.port}"
    alive = {f"127.0.0.1:{w.port}" for w in survivors}

    def moved() -> Any:
        s = _all_running(survivors[0].url, "pg", 6)
        return s if s and {t["worker_id"] for t in s["tasks"]} <= alive else None
    status = wait_for(moved, timeout=90, what="the killed worker's tasks running elsewhere")
    assert victim_id not in {t["worker_id"] for t in status["tasks"]}
    # the status topic tells the story: a task RUNNING on the victim, then on a survivor in a
    # later generation of the group
    history = _status_history(broker.bootstrap)
    moved_tasks = [key for key, states in history.items() if key.startswith("status-task-pg-")
                   and any(s["worker_id"] == victim_id and s["state"] == "RUNNING" for s in states)]
    assert moved_tasks, history
    for key in moved_tasks:
        states = history[key]
        last_on_victim = max(s["generation"] for s in states if s["worker_id"] == victim_id)
        assert any(s["state"] == "RUNNING" and s["worker_id"] in alive and s["generation"] > last_on_victim
                   for s in states), states
    assert _all_running(survivors[0].url, "src", 1)
    expected = {f"line-{i}" for i in range(400)}
    wait_for(lambda: _pg_lines(postgres) == (400, expected), timeout=90,
             what=f"every line in PostgreSQL once after the failover (now {(_pg_lines(postgres) or (0,))[0]} rows)")

    # a new worker joins: the incremental cooperative rebalance revokes work from the loaded
    # workers and hands it to the newcomer, which reads every config from the topics
    newcomer = connect_factory(broker.bootstrap, **props)
    new_id = f"127.0.0.1:{newcomer.port}"

    def spread() -> Any:
        sink, src = _all_running(newcomer.url, "pg", 6), _all_running(newcomer.url, "src", 1)
        if not sink or not src:
            return None
        owners = [s["connector"]["worker_id"] for s in (sink, src)] + [t["worker_id"] for s in (sink, src)
                                                                       for t in s["tasks"]]
        counts = Counter(owners)                                 # 9 units over 4 workers: 3, 2, 2, 2
        return counts if counts[new_id] >= 2 and max(counts.values()) - min(counts.values()) <= 1 else None
    counts = wait_for(spread, timeout=90, what="work on the new worker")
    assert set(counts) == alive | {new_id}, counts
    with open(source_file, "a") as f:
        f.write(_lines(400, 420))
    expected = {f"line-{i}" for i in range(420)}
    wait_for(lambda: _pg_lines(postgres) == (420, expected), timeout=60,
             what="every line in PostgreSQL once after the new worker joined")
    offsets = dict(postgres.execute("SELECT line, kafka_offset FROM dist_lines"))
    assert all(isinstance(o, int) for o in offsets.values()) and len(offsets) == 420   # the row's content


def test_eager_protocol_moves_tasks_of_a_killed_worker(broker: Any, connect_factory: Any, tmp_path: Path) -> None:
    """connect.protocol=eager: every rebalance stops all work and the leader deals it out again
    round-robin; after one of two workers is killed the other runs all of it."""
    create_topic(broker, "eager-lines", 2)
    props = {"connect.protocol": "eager", "group.id": "eager-cluster", "config.storage.topic": "eager-configs",
             "offset.storage.topic": "eager-offsets", "status.storage.topic": "eager-status"}
    workers = [connect_factory(broker.bootstrap, **props) for _ in range(2)]
    out = tmp_path / "eager.txt"
    code, body = _call("POST", f"{workers[0].url}/connectors", {"name": "eager-sink", "config": {
        "connector.class": "FileStreamSink", "tasks.max": "2", "file": str(out), "topics": "eager-lines",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"}})
    assert code == 201, body
    status = wait_for(lambda: _all_running(workers[0].url, "eager-sink", 2), timeout=60, what="2 tasks running")
    owners = [status["connector"]["worker_id"]] + [t["worker_id"] for t in status["tasks"]]
    assert len(set(owners)) == 2                                  # connector, task 0, task 1 dealt round-robin
    workers[1].kill()
    survivor = f"127.0.0.1:{workers[0].port}"
    wait_for(lambda: (s := _all_running(workers[0].url, "eager-sink", 2)) and
             {t["worker_id"] for t in s["tasks"]} | {s["connector"]["worker_id"]} == {survivor},
             timeout=60, what="all work on the survivor")
    with Producer(broker.bootstrap) as producer:
        for i in range(6):
            producer.send("eager-lines", f'"e{i}"'.encode(), partition=i % 2)
        producer.flush(10)
    wait_for(lambda: out.exists() and sorted(out.read_text().split()) == [f"e{i}" for i in range(6)],
             timeout=60, what="records through both tasks on the survivor")
