"""The standalone herder and the worker's task loops, in memory (fake brokers, real connectors,
converters and offset file)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkalite.connect.connectors.file import FileStreamSourceConnector
from kafkalite.connect.errors import AlreadyExistsException, ConnectException, NotFoundException
from kafkalite.connect.runtime.herder import BadRequestException
from kafkalite.connect.runtime.offsets import FileOffsetStore
from kafkalite.connect.runtime.standalone import StandaloneHerder
from kafkalite.connect.runtime.status import MemoryStatusStore
from kafkalite.connect.runtime.worker import Worker
from tests.support.waiting import wait_for

from .connect_fakes import FakeBroker, FakeClients, worker_config


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    broker = FakeBroker()
    made: list[StandaloneHerder] = []

    def make(**extra: str) -> tuple[StandaloneHerder, FakeBroker, Path]:
        config = worker_config(tmp_path, **extra)
        status = MemoryStatusStore()
        worker = Worker("127.0.0.1:8083", config, FileOffsetStore(config.offset_file), status,
                        clients=FakeClients(broker))
        herder = StandaloneHerder(worker, status, "cluster-1")
        made.append(herder)
        return herder, broker, tmp_path
    yield make
    for h in made:
        h.stop()


def source(tmp: Path, name: str = "local-file-source", **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": "FileStreamSource", "tasks.max": "1",
            "file": str(tmp / "test.txt"), "topic": "connect-test", **extra}


def sink(tmp: Path, name: str = "local-file-sink", **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": "FileStreamSink", "tasks.max": "1",
            "file": str(tmp / "test.sink.txt"), "topics": "connect-test", **extra}


def test_file_source_to_sink_and_offsets_survive_restart(setup: Any) -> None:
    """The quickstart in memory: lines go source -> topic -> sink; the source's committed position
    lands in the offsets file, and a new worker resumes after it (no line twice)."""
    herder, broker, tmp = setup()
    (tmp / "test.txt").write_text("foo\nbar\n")
    created, info = herder.put_connector_config("local-file-source", source(tmp), False)
    assert created and info["type"] == "source" and info["tasks"] == [{"connector": "local-file-source", "task": 0}]
    herder.put_connector_config("local-file-sink", sink(tmp), False)
    wait_for(lambda: (tmp / "test.sink.txt").exists() and (tmp / "test.sink.txt").read_text() == "foo\nbar\n",
             what="the sink file")
    assert broker.values("connect-test") == [b'"foo"', b'"bar"']
    wait_for(lambda: (tmp / "connect.offsets").exists() and "706f736974696f6e" in (tmp / "connect.offsets").read_text(),
             what="source offsets committed")
    status = herder.connector_status("local-file-source")
    assert status["connector"]["state"] == "RUNNING" and status["tasks"][0]["state"] == "RUNNING"
    assert herder.active_topics("local-file-sink") == {"local-file-sink": {"topics": ["connect-test"]}}
    herder.stop()
    doc = json.loads((tmp / "connect.offsets").read_text())
    pairs = [(json.loads(bytes.fromhex(k)), json.loads(bytes.fromhex(v))) for k, v in doc["offsets"].items()]
    assert pairs == [(["local-file-source", {"filename": str(tmp / "test.txt")}], {"position": 8})]

    with open(tmp / "test.txt", "a") as f:
        f.write("baz\n")
    herder2, _, _ = setup()
    herder2.put_connector_config("local-file-source", source(tmp), False)
    wait_for(lambda: len(broker.values("connect-test")) >= 3, what="the new line")
    herder2.stop()
    assert broker.values("connect-test") == [b'"foo"', b'"bar"', b'"baz"']


def test_transforms_and_predicates_run_in_the_source_pipeline(setup: Any) -> None:
    """A RegexRouter renames the topic and a Filter (negated RecordIsTombstone... on a topic
    predicate) drops what matches; the offsets of dropped records still advance."""
    herder, broker, tmp = setup()
    (tmp / "test.txt").write_text("keep\nkeep2\n")
    herder.put_connector_config("routed", source(tmp, "routed", **{
        "transforms": "route,hoist", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "connect-(.*)", "transforms.route.replacement": "routed-$1",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "line"}), False)
    wait_for(lambda: len(broker.values("routed-test")) == 2, what="records on the renamed topic")
    assert broker.values("routed-test") == [b'{"line":"keep"}', b'{"line":"keep2"}']
    assert broker.values("connect-test") == []
    bad = source(tmp, "bad", transforms="x", **{"transforms.x.type": "NoSuchTransform"})
    with pytest.raises(BadRequestException):
        herder.put_connector_config("bad", bad, False)


def test_create_update_pause_delete_in_memory(setup: Any) -> None:
    herder, broker, tmp = setup()
    (tmp / "test.txt").write_text("a\n")
    herder.put_connector_config("s", source(tmp, "s"), False)
    with pytest.raises(AlreadyExistsException):
        herder.put_connector_config("s", source(tmp, "s"), False)
    created, info = herder.put_connector_config("s", source(tmp, "s", **{"batch.size": "5"}), True)
    assert not created and info["config"]["batch.size"] == "5"
    wait_for(lambda: herder.connector_status("s")["tasks"], what="the task's status")
    herder.pause_connector("s")
    wait_for(lambda: herder.connector_status("s")["tasks"][0]["state"] == "PAUSED", what="PAUSED")
    herder.resume_connector("s")
    wait_for(lambda: herder.connector_status("s")["tasks"][0]["state"] == "RUNNING", what="RUNNING")
    herder.delete_connector("s")
    with pytest.raises(NotFoundException):
        herder.connector_status("s")
    assert herder.connectors() == []


class BrokenConnector(FileStreamSourceConnector):
    def start(self, props: dict[str, str]) -> None:
        raise RuntimeError("cannot reach the source system")


def test_a_connector_that_fails_to_start_is_an_error_and_failed_status(setup: Any) -> None:
    herder, _, tmp = setup()
    with pytest.raises(ConnectException, match="Failed to start connector: broken"):
        herder.put_connector_config("broken", source(tmp, "broken", **{"connector.class": f"{__name__}.BrokenConnector"}),
                                    False)
    status = herder.connector_status("broken")
    assert status["connector"]["state"] == "FAILED" and "cannot reach the source system" in status["connector"]["trace"]


def test_topics_regex_picks_up_new_matching_topics(setup: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkalite.connect.runtime import sink_task
    monkeypatch.setattr(sink_task, "REGEX_REFRESH", 0.1)
    herder, broker, tmp = setup()
    broker.append("metrics-a", b'"a1"')
    broker.append("other", b'"x"')
    herder.put_connector_config("rx", {"name": "rx", "connector.class": "FileStreamSink",
                                       "topics.regex": "metrics-.*", "file": str(tmp / "rx.txt")}, False)
    out = tmp / "rx.txt"
    wait_for(lambda: out.exists() and out.read_text() == "a1\n", what="the first matching topic")
    broker.append("metrics-b", b'"b1"')
    wait_for(lambda: sorted(out.read_text().split()) == ["a1", "b1"], what="the new matching topic")


def test_plugin_path_modules_can_be_named_as_connector_classes(setup: Any, tmp_path: Path) -> None:
    """A connector in a directory listed in plugin.path is found by its module path."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "acme_connectors.py").write_text(
        "from kafkalite.connect.connectors.file import FileStreamSourceConnector\n"
        "class AcmeSource(FileStreamSourceConnector):\n"
        "    def version(self):\n"
        "        return '9.9'\n")
    herder, broker, tmp = setup(**{"plugin.path": str(plugins)})
    (tmp / "test.txt").write_text("from-a-plugin\n")
    created, info = herder.put_connector_config("acme", source(tmp, "acme", **{"connector.class":
                                                                               "acme_connectors.AcmeSource"}), False)
    assert created and info["type"] == "source"
    wait_for(lambda: broker.values("connect-test") == [b'"from-a-plugin"'], what="the plugin's record")


def test_client_overrides_follow_the_override_policy(setup: Any) -> None:
    """KIP-458: with the default policy None a connector's consumer.override.* is refused; with All
    it is accepted (and handed to the task's consumer)."""
    herder, _, tmp = setup()
    with pytest.raises(BadRequestException, match="'None' policy does not allow 'max.poll.records'"):
        herder.put_connector_config("o", sink(tmp, "o", **{"consumer.override.max.poll.records": "5"}), False)
    herder2, _, _ = setup(**{"connector.client.config.override.policy": "All"})
    created, info = herder2.put_connector_config("o", sink(tmp, "o", **{"consumer.override.max.poll.records": "5"}),
                                                 False)
    assert created and info["config"]["consumer.override.max.poll.records"] == "5"


class GrowingSourceConnector(FileStreamSourceConnector):
    """A connector whose source grows: its task count changes and it asks for new task configs."""
    tasks = 1

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props, shard=str(i)) for i in range(min(type(self).tasks, max_tasks))]


def test_a_connector_requesting_reconfiguration_gets_new_tasks(setup: Any) -> None:
    herder, _, tmp = setup()
    (tmp / "test.txt").write_text("")
    herder.put_connector_config("grow", source(tmp, "grow", **{"connector.class": f"{__name__}.GrowingSourceConnector",
                                                               "tasks.max": "4"}), False)
    assert len(herder.task_configs("grow")) == 1
    GrowingSourceConnector.tasks = 2
    context = herder.worker.connectors["grow"].connector.context
    assert context is not None
    context.request_task_reconfiguration()           # from the connector's side, as its monitor thread would
    wait_for(lambda: len(herder.task_configs("grow")) == 2, what="the second task")
    assert [t["config"]["shard"] for t in herder.task_configs("grow")] == ["0", "1"]
    wait_for(lambda: len(herder.connector_status("grow")["tasks"]) == 2, what="both tasks running")
