"""A distributed Connect cluster of real worker processes on a real broker: connectors created
through one worker run across all of them; a worker killed with SIGKILL has its tasks reassigned
to the survivors, and the status topic tells who runs what."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
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


def test_tasks_move_when_a_worker_is_killed_and_spread_when_one_joins(broker: Any, connect_factory: Any,
                                                             tmp_path: Path) -> None:
    """Three workers (incremental cooperative protocol with signed internal requests, sessioned,
    a 2 s scheduled rebalance delay): a file source and a 3-task file sink created through a
    follower (task configs reach the config topic through the leader); SIGKILL of a worker running sink
    tasks: after the session timeout and the delay its tasks RUN on the others (their status
    records name the new workers) and every line still reaches the sink file; a fourth worker
    joins and the work is spread evenly again (two units each)."""
    create_topic(broker, "dist-lines", 3)
    props = {"connect.protocol": "sessioned", "scheduled.rebalance.max.delay.ms": "2000"}
    workers = [connect_factory(broker.bootstrap, **props) for _ in range(3)]
    url = workers[1].url
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"line-{i}\n" for i in range(20)))
    code, body = _call("POST", f"{url}/connectors", {"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": "dist-lines"}})
    assert code == 201, body
    assert body["name"] == "src" and body["config"]["file"] == str(source_file)
    # through two different workers: one at least is a follower, which forwards to the leader
    code, body = _call("POST", f"{workers[2].url}/connectors", {"name": "sink", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "3",
        "file": str(sink_file), "topics": "dist-lines"}})
    assert code == 201, body
    code, body = _call("POST", f"{url}/connectors", {"name": "sink", "config": {
        "connector.class": "FileStreamSink", "topics": "dist-lines"}})
    assert code == 409 and body["error_code"] == 409
    wait_for(lambda: _all_running(url, "src", 1), timeout=60, what="the source running")
    status = wait_for(lambda: _all_running(url, "sink", 3), timeout=60, what="the sink's 3 tasks running")
    owners = {t["worker_id"] for t in status["tasks"]}
    assert len(owners) >= 2, status                           # spread over the workers
    wait_for(lambda: sink_file.exists() and len(set(sink_file.read_text().split())) == 20, timeout=60,
             what="the first lines in the sink")
    # KIP-507: the leader's session key, Kafka's record; no internal request was refused
    [key] = _status_history(broker.bootstrap, "connect-configs")["session-key"][-1:]
    assert set(key) == {"key", "algorithm", "creation-timestamp"} and key["algorithm"] == "HmacSHA256"
    logs = "".join(w.log_path.read_text(errors="replace") for w in workers)
    assert "signature" not in logs, logs[-3000:]

    victim = next(w for w in workers if f"127.0.0.1:{w.port}" in owners)
    victim.kill()
    survivors = [w for w in workers if w is not victim]
    victim_id = f"127.0.0.1:{victim.port}"
    alive = {f"127.0.0.1:{w.port}" for w in survivors}

    def moved() -> Any:
        s = _all_running(survivors[0].url, "sink", 3)
        return s if s and {t["worker_id"] for t in s["tasks"]} <= alive else None
    status = wait_for(moved, timeout=90, what="the killed worker's tasks running elsewhere")
    assert victim_id not in {t["worker_id"] for t in status["tasks"]}
    # the status topic tells the story: a task RUNNING on the victim, then on a survivor in a
    # later generation of the group
    history = _status_history(broker.bootstrap)
    moved_tasks = [key for key, states in history.items() if key.startswith("status-task-sink-")
                   and any(s["worker_id"] == victim_id and s["state"] == "RUNNING" for s in states)]
    assert moved_tasks, history
    for key in moved_tasks:
        states = history[key]
        last_on_victim = max(s["generation"] for s in states if s["worker_id"] == victim_id)
        assert any(s["state"] == "RUNNING" and s["worker_id"] in alive and s["generation"] > last_on_victim
                   for s in states), states
    assert _all_running(survivors[0].url, "src", 1)
    with open(source_file, "a") as f:
        f.write("".join(f"line-{i}\n" for i in range(20, 30)))
    wait_for(lambda: set(sink_file.read_text().split()) == {f"line-{i}" for i in range(30)}, timeout=60,
             what="every line in the sink after the failover")

    # a new worker joins: the incremental cooperative rebalance revokes work from the loaded
    # workers and hands it to the newcomer, which reads every config from the topics
    newcomer = connect_factory(broker.bootstrap, **props)
    new_id = f"127.0.0.1:{newcomer.port}"

    def spread() -> Any:
        sink, src = _all_running(newcomer.url, "sink", 3), _all_running(newcomer.url, "src", 1)
        if not sink or not src:
            return None
        owners = [s["connector"]["worker_id"] for s in (sink, src)] + [t["worker_id"] for s in (sink, src)
                                                                       for t in s["tasks"]]
        return owners if owners.count(new_id) >= 2 else None     # 6 units over 3 workers: 2 each
    owners = wait_for(spread, timeout=90, what="work on the new worker")
    assert all(owners.count(w) == 2 for w in set(owners)), owners
    with open(source_file, "a") as f:
        f.write("".join(f"line-{i}\n" for i in range(30, 35)))
    wait_for(lambda: set(sink_file.read_text().split()) == {f"line-{i}" for i in range(35)}, timeout=60,
             what="every line in the sink after the new worker joined")


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
