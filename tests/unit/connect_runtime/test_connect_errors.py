"""KIP-298 error handling: retries with back-off, tolerance, the reporters, and a sink whose put
fails transiently (retried, nothing lost) or a record it cannot convert (dead-lettered)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pytest

from kafkalite.connect.connector import SinkConnector, SinkTask, Task, TopicPartition
from kafkalite.connect.config import ConfigDef
from kafkalite.connect.errors import DataException, RetriableException
from kafkalite.connect.records import SinkRecord
from kafkalite.connect.runtime.errors import (ConsumedRecord, DeadLetterQueueReporter, ErrorHandlingConfig,
                                              RetryWithToleranceOperator, Stage)
from kafkalite.connect.runtime.offsets import MemoryOffsetStore
from kafkalite.connect.runtime.standalone import StandaloneHerder
from kafkalite.connect.runtime.status import MemoryStatusStore
from kafkalite.connect.runtime.worker import Worker
from tests.support.waiting import wait_for

from .connect_fakes import FakeBroker, FakeClients, FakeProducer, worker_config


def test_retriable_failures_back_off_exponentially_until_the_timeout() -> None:
    sleeps: list[float] = []
    now = [0.0]

    def sleep(s: float) -> bool:
        sleeps.append(s)
        now[0] += s
        return False
    op = RetryWithToleranceOperator(ErrorHandlingConfig(retry_timeout_ms=5000, retry_delay_max_ms=1000,
                                                        tolerance_all=True), "c", 0, sleep=sleep,
                                    clock=lambda: now[0])
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 4:
            raise RetriableException("not yet")
        return "done"
    assert op.execute(flaky, Stage.TRANSFORMATION, "x") == "done"
    assert sleeps == [0.3, 0.6, 1.0]                         # 300 ms doubling, capped by retry.delay.max
    op.reset()

    def always() -> str:
        raise RetriableException("never")
    assert op.execute(always, Stage.KEY_CONVERTER, "x") is None     # out of time: tolerated
    assert op.failed and op.total_errors_skipped == 1
    assert sum(sleeps) <= 5.0 + 2.0


def test_tolerance_none_fails_and_all_skips_with_reports() -> None:
    broker = FakeBroker()
    cfg = ErrorHandlingConfig(tolerance_all=False, dlq_topic="dlq", dlq_context_headers=True)
    op = RetryWithToleranceOperator(cfg, "c", 3)
    op.reporters.append(DeadLetterQueueReporter(cfg, FakeProducer(broker)))
    op.reset(consumed=ConsumedRecord("in", 2, 41, b"k", b"v"))

    def bad() -> None:
        raise DataException("bad bytes")
    with pytest.raises(Exception, match="Tolerance exceeded in error handler"):
        op.execute(bad, Stage.VALUE_CONVERTER, "conv")
    assert broker.values("dlq") == [b"v"]                      # reported before failing
    headers = dict(broker.records("dlq")[0].headers)
    assert headers["__connect.errors.offset"] == b"41" and headers["__connect.errors.task.id"] == b"3"
    op_all = RetryWithToleranceOperator(ErrorHandlingConfig(tolerance_all=True), "c", 0)
    op_all.reset()
    assert op_all.execute(bad, Stage.TRANSFORMATION, "t") is None and op_all.total_failures == 1


class FlakySinkTask(SinkTask):
    """Fails put with RetriableException twice per batch ... the first two calls."""
    calls = 0
    written: list[Any] = []

    def start(self, props: dict[str, str]) -> None:
        pass

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            type(self).calls += 1
            if type(self).calls <= 2:
                raise RetriableException("database restarting")
        type(self).written.extend(r.value for r in records)

    def stop(self) -> None:
        pass


class FlakySinkConnector(SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[Task]:
        return FlakySinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return ConfigDef()


def _herder(tmp: Path, broker: FakeBroker) -> StandaloneHerder:
    config = worker_config(tmp)
    status = MemoryStatusStore()
    return StandaloneHerder(Worker("w:1", config, MemoryOffsetStore(), status, clients=FakeClients(broker)),
                            status, "c")


def test_retriable_put_is_redelivered_and_nothing_is_lost(tmp_path: Path) -> None:
    broker = FakeBroker()
    for i in range(5):
        broker.append("in", str(i).encode())
    herder = _herder(tmp_path, broker)
    try:
        herder.put_connector_config("flaky", {"connector.class": f"{__name__}.FlakySinkConnector",
                                              "topics": "in"}, False)
        wait_for(lambda: len(FlakySinkTask.written) >= 5, what="every record written")
        assert FlakySinkTask.written == [0, 1, 2, 3, 4] and FlakySinkTask.calls >= 3
        wait_for(lambda: broker.committed.get("connect-flaky", {}).get(TopicPartition("in", 0)) == 5,
                 what="the offsets committed after the put succeeded")
        assert herder.connector_status("flaky")["tasks"][0]["state"] == "RUNNING"
    finally:
        herder.stop()


def test_unconvertible_record_fails_the_task_with_its_trace_under_tolerance_none(tmp_path: Path) -> None:
    broker = FakeBroker()
    broker.append("in", b"{oops")
    herder = _herder(tmp_path, broker)
    try:
        herder.put_connector_config("strict", {"connector.class": "FileStreamSink", "topics": "in",
                                               "file": str(tmp_path / "o.txt")}, False)
        status = wait_for(lambda: (s := herder.connector_status("strict"))["tasks"] and
                          s["tasks"][0]["state"] == "FAILED" and s, what="the task FAILED")
        assert "Tolerance exceeded in error handler" in status["tasks"][0]["trace"]
        answer = herder.restart_connector("strict", include_tasks=True, only_failed=True)
        assert answer is not None and answer["tasks"][0]["state"] == "RESTARTING"
        assert answer["connector"]["state"] == "RUNNING"       # only the failed task restarts
    finally:
        herder.stop()


def test_errant_record_reporter_dead_letters_from_put(tmp_path: Path) -> None:
    broker = FakeBroker()
    broker.append("in", b'"good"')
    broker.append("in", b'"reject-me"')
    herder = _herder(tmp_path, broker)
    try:
        herder.put_connector_config("errant", {"connector.class": f"{__name__}.RejectingSinkConnector",
                                               "topics": "in", "errors.tolerance": "all",
                                               "errors.deadletterqueue.topic.name": "dlq"}, False)
        wait_for(lambda: broker.values("dlq") == [b'"reject-me"'], what="the rejected record in the DLQ")
        assert RejectingSinkTask.kept == ["good"]
    finally:
        herder.stop()


class RejectingSinkTask(FlakySinkTask):
    kept: list[Any] = []

    def put(self, records: list[SinkRecord]) -> None:
        assert self.context is not None
        reporter = self.context.errant_record_reporter()
        for r in records:
            if r.value == "reject-me":
                assert reporter is not None
                reporter.report(r, ValueError("rejected")).result(5)
            else:
                type(self).kept.append(r.value)

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        pass


class RejectingSinkConnector(FlakySinkConnector):
    def task_class(self) -> type[Task]:
        return RejectingSinkTask


class OrderedSinkTask(FlakySinkTask):
    """Records whether put ever ran after stop (Kafka never does that to a sink task)."""
    stopped = False
    put_after_stop = False

    def put(self, records: list[SinkRecord]) -> None:
        if type(self).stopped:
            type(self).put_after_stop = True

    def stop(self) -> None:
        type(self).stopped = True


class OrderedSinkConnector(FlakySinkConnector):
    def task_class(self) -> type[Task]:
        return OrderedSinkTask


def test_stopping_a_sink_task_stops_it_on_its_own_thread_and_leaves_it_unassigned(tmp_path: Path) -> None:
    broker = FakeBroker()
    broker.append("in", b"1")
    herder = _herder(tmp_path, broker)
    herder.put_connector_config("ordered", {"connector.class": f"{__name__}.OrderedSinkConnector",
                                            "topics": "in"}, False)
    wait_for(lambda: herder.connector_status("ordered")["tasks"] and
             herder.connector_status("ordered")["tasks"][0]["state"] == "RUNNING", what="RUNNING")
    herder.stop()
    assert OrderedSinkTask.stopped and not OrderedSinkTask.put_after_stop
    assert herder.status_store.get_task("ordered", 0).state == "UNASSIGNED"   # type: ignore[union-attr]
