"""How the SQL server starts and configures its Spark queries, without Spark: ``await_sources``
(queries start one source initialization after the other: Spark's 10 s connect-back wait for a
Python streaming source's process is not configurable) and the driver's thread stack the server's
session asks for (a query stopped mid-batch must not overflow Spark's interruption regex)."""
from __future__ import annotations

from typing import Any

from kafkalite.sql.queries import await_sources
from spark_integration.session import DRIVER_JAVA_OPTIONS, session_conf


class FakeQuery:
    """A StreamingQuery whose status message goes through ``messages``, one per poll."""

    def __init__(self, messages: list[str], active: bool = True, fail: bool = False) -> None:
        self.messages, self.isActive, self.fail, self.polls = messages, active, fail, 0
        self.name = "CSAS_X_1"

    @property
    def status(self) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("py4j: the query failed")
        self.polls += 1
        message = self.messages[min(self.polls - 1, len(self.messages) - 1)]
        return {"message": message, "isDataAvailable": False, "isTriggerActive": False}


def test_waits_until_the_sources_are_created() -> None:
    q = FakeQuery(["Initializing StreamExecution", "Initializing sources", "Initializing sources",
                   "Waiting for next trigger"])
    await_sources(q)
    assert q.polls == 4


def test_returns_for_a_stopped_or_failed_query() -> None:
    stopped = FakeQuery(["Initializing sources"], active=False)
    await_sources(stopped)
    assert stopped.polls == 0
    await_sources(FakeQuery([], fail=True))                 # no exception: its supervisor reports it


def test_gives_up_waiting_after_the_timeout(caplog: Any) -> None:
    q = FakeQuery(["Initializing sources"])
    await_sources(q, timeout_s=0.2)
    assert q.polls >= 1 and "still initializing its sources" in caplog.text


def test_the_driver_gets_a_larger_thread_stack_unless_the_user_sets_one() -> None:
    assert DRIVER_JAVA_OPTIONS == "-Xss16m"
    assert session_conf("local[2]")["spark.driver.defaultJavaOptions"] == "-Xss16m"
    assert session_conf("spark://h:7077")["spark.driver.defaultJavaOptions"] == "-Xss16m"
    mine = session_conf("local[2]", {"spark.driver.defaultJavaOptions": "-Xss32m -XX:+UseG1GC"})
    assert mine["spark.driver.defaultJavaOptions"] == "-Xss32m -XX:+UseG1GC"
