"""The replica fetcher delays only the partition that failed, as Kafka's AbstractFetcherThread
does (PartitionFetchState with a DelayedItem): the others are fetched in the very next round.

The leader is a fake that records each request and lets the test answer it; the reactor is a
fake clock, so "the others are fetched at once" and "this one waits one back-off" are exact.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from twisted.internet import defer, task

from kafkalite.errors import ErrorCode, KafkaStorageError
from kafkalite.net.client import ConnectionLost
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.replication.fetcher import ReplicaFetcher, fetch_version

BACKOFF_MS = 1000
CONFIG = {"inter.broker.protocol.version": "2.8-IV1",
          "replica.fetch.backoff.ms": BACKOFF_MS, "replica.socket.timeout.ms": 30000,
          "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
          "replica.fetch.max.bytes": 1 << 20, "replica.fetch.response.max.bytes": 10 << 20}
BACKOFF = BACKOFF_MS / 1000


class FakeLog:
    def __init__(self, end: int) -> None:
        self.log_end_offset = end
        self.log_start_offset = 0
        self.epochs = SimpleNamespace(latest_epoch=0)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return epoch, self.log_end_offset

    def truncate_to(self, offset: int) -> None:
        self.log_end_offset = offset

    def append(self, records: Any, infos: Any, **kw: Any) -> None:   # records are None here
        raise AssertionError("no records in these tests")

    def truncate_fully_and_start_at(self, offset: int, now: int) -> None:
        self.log_start_offset = self.log_end_offset = offset


def partition(index: int, end: int = 10, epoch: int = 1) -> Any:
    return SimpleNamespace(key=("t", index), topic="t", index=index, leader_epoch=epoch,
                           high_watermark=end, log=FakeLog(end))


class Conn:
    def __init__(self, leader: "Leader") -> None:
        self.leader = leader
        self.closed = False

    def request(self, api: int, version: int, body: dict[str, Any], timeout: float) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.leader.requests.append(SimpleNamespace(conn=self, api=api, body=body, d=d))
        return d

    def close(self) -> None:
        self.closed = True


class Leader:
    """Records requests in order; the test answers them."""

    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.requests: list[Any] = []
        self.conns: list[Conn] = []

    def connect(self, reactor: Any, host: str, port: int, client_id: str, timeout: float) -> defer.Deferred:
        conn = Conn(self)
        self.conns.append(conn)
        return defer.succeed(conn)

    def take(self, api: int) -> Any:
        """The oldest unanswered request of this API (fails if there is none)."""
        self.clock.advance(0)                    # let the fetcher run what it scheduled for now
        for r in self.requests:
            if r.api == api and not r.d.called:
                return r
        raise AssertionError(f"no outstanding request with api {api}")

    def outstanding(self, api: int) -> list[Any]:
        self.clock.advance(0)
        return [r for r in self.requests if r.api == api and not r.d.called]


def partitions_in(req: Any) -> list[int]:
    return sorted(p["partition"] for t in req.body["topics"] for p in t["partitions"])


def answer_epochs(req: Any, errors: dict[int, int] | None = None) -> None:
    errors = errors or {}
    req.d.callback({"topics": [{"topic": t["topic"], "partitions": [
        {"partition": p["partition"], "error_code": errors.get(p["partition"], ErrorCode.NONE),
         "leader_epoch": p["current_leader_epoch"], "end_offset": 10} for p in t["partitions"]]}
        for t in req.body["topics"]]})


def answer_fetch(req: Any, errors: dict[int, int] | None = None) -> None:
    errors = errors or {}
    req.d.callback({"error_code": ErrorCode.NONE, "responses": [{"topic": t["topic"], "partitions": [
        {"partition_index": p["partition"], "error_code": errors.get(p["partition"], ErrorCode.NONE),
         "high_watermark": p["fetch_offset"], "log_start_offset": 0, "records": None}
        for p in t["partitions"]]} for t in req.body["topics"]]})


@pytest.fixture
def setup() -> Iterator[tuple[task.Clock, Leader, ReplicaFetcher]]:
    clock = task.Clock()
    leader = Leader(clock)
    fetcher = ReplicaFetcher(1, 2, clock, CONFIG, lambda broker: ("127.0.0.1", 9), connect=leader.connect)
    yield clock, leader, fetcher
    fetcher.stop()


def follow_and_truncate(clock: task.Clock, leader: Leader, fetcher: ReplicaFetcher, *indexes: int) -> None:
    for i in indexes:
        fetcher.add(partition(i))
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))


def test_a_partition_answered_with_an_error_is_delayed_the_others_fetched_at_once(setup) -> None:
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0, 1)
    first = leader.take(ApiKey.FETCH)
    assert partitions_in(first) == [0, 1]
    answer_fetch(first, {0: ErrorCode.NOT_LEADER_OR_FOLLOWER})
    second = leader.take(ApiKey.FETCH)           # no clock advance: the healthy one goes on at once
    assert partitions_in(second) == [1]
    answer_fetch(second)
    assert partitions_in(leader.take(ApiKey.FETCH)) == [1]  # still without the delayed one
    answer_fetch(leader.take(ApiKey.FETCH))
    clock.advance(BACKOFF)
    answer_fetch(leader.take(ApiKey.FETCH))      # the first round after its delay includes it again
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0, 1]


def test_an_error_while_a_partition_is_delayed_does_not_extend_its_delay(setup) -> None:
    """Kafka's delayPartitions leaves an already delayed partition's deadline alone."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    answer_fetch(leader.take(ApiKey.FETCH), {0: ErrorCode.UNKNOWN_LEADER_EPOCH})
    clock.advance(BACKOFF / 2)
    fetcher.delay(fetcher.partitions.values())
    assert not leader.outstanding(ApiKey.FETCH)
    clock.advance(BACKOFF / 2)
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0]


def test_a_failed_truncation_delays_only_that_partition(setup) -> None:
    clock, leader, fetcher = setup
    fetcher.add(partition(0))
    fetcher.add(partition(1))
    req = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert partitions_in(req) == [0, 1]
    answer_epochs(req, {0: ErrorCode.UNKNOWN_LEADER_EPOCH})
    assert partitions_in(leader.take(ApiKey.FETCH)) == [1]  # fetched at once, not after a back-off
    clock.advance(BACKOFF - 0.01)
    answer_fetch(leader.take(ApiKey.FETCH))
    assert partitions_in(leader.take(ApiKey.FETCH)) == [1]  # a round before its delay ends: not retried
    assert not leader.outstanding(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    clock.advance(0.01)
    answer_fetch(leader.take(ApiKey.FETCH))
    retry = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)  # the first round after it
    assert partitions_in(retry) == [0]
    answer_epochs(retry)
    answer_fetch(leader.take(ApiKey.FETCH))
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0, 1]


def test_nothing_fetchable_waits_only_until_truncation_completes(setup) -> None:
    """Every partition still truncating is no reason to sleep a whole back-off once one is done."""
    clock, leader, fetcher = setup
    fetcher.add(partition(0))
    assert not leader.outstanding(ApiKey.FETCH)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0]  # at once, no clock advance


def test_a_partition_added_during_a_parked_fetch_is_truncated_then_fetched_in_the_next_round(setup) -> None:
    """Kafka's order on one connection: the truncation step follows the parked fetch's answer,
    and the same round fetches the new partition with the others (no back-off in between)."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    parked = leader.take(ApiKey.FETCH)           # the leader holds it (long poll)
    fetcher.add(partition(1))
    assert not leader.outstanding(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    answer_fetch(parked)
    req = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert partitions_in(req) == [1] and req.conn is parked.conn
    answer_epochs(req)
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0, 1]


def test_partitions_added_in_one_reactor_turn_share_one_truncation_request(setup) -> None:
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    answer_fetch(leader.take(ApiKey.FETCH), {0: ErrorCode.NOT_LEADER_OR_FOLLOWER})  # now idle: 0 is delayed
    for i in (1, 2, 3):
        fetcher.add(partition(i))
    assert partitions_in(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)) == [1, 2, 3]


def test_a_failed_fetch_request_backs_off_its_partitions_and_reconnects(setup) -> None:
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    req = leader.take(ApiKey.FETCH)
    req.conn.closed = True
    req.d.errback(ConnectionLost("reset"))
    assert not leader.outstanding(ApiKey.FETCH)
    clock.advance(BACKOFF - 0.01)
    assert not leader.outstanding(ApiKey.FETCH)
    clock.advance(0.01)
    again = leader.take(ApiKey.FETCH)
    assert partitions_in(again) == [0] and again.conn is not req.conn


def test_a_truncation_finished_meanwhile_ends_the_back_off_after_a_failed_fetch(setup) -> None:
    """Delays are per partition: a partition ready during another's back-off is fetched at once."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    leader.take(ApiKey.FETCH).d.errback(ConnectionLost("reset"))
    fetcher.add(partition(1))
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    assert partitions_in(leader.take(ApiKey.FETCH)) == [1]


def test_an_answer_for_an_earlier_incarnation_is_ignored(setup) -> None:
    """Removed and re-added (a new leader epoch) while its fetch was out: the old answer neither
    delays nor advances the new state, which truncates first."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    old = leader.take(ApiKey.FETCH)
    fetcher.remove(("t", 0))
    fetcher.add(partition(0, epoch=2))
    answer_fetch(old, {0: ErrorCode.FENCED_LEADER_EPOCH})
    assert not any(f.delayed_until for f in fetcher.partitions.values())
    req = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert req.body["topics"][0]["partitions"][0]["current_leader_epoch"] == 2
    answer_epochs(req)
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0]


def test_truncation_answer_applies_the_divergence(setup) -> None:
    clock, leader, fetcher = setup
    part = partition(0, end=15)
    fetcher.add(part)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))  # the leader's epoch ends at 10
    assert part.log.log_end_offset == 10 and part.high_watermark == 10
    assert leader.take(ApiKey.FETCH).body["topics"][0]["partitions"][0]["fetch_offset"] == 10


def test_with_every_partition_delayed_the_fetcher_waits_until_the_first_is_due(setup) -> None:
    """Nothing fetchable: the idle back-off ends when a delayed partition is due, and a partition
    added meanwhile is truncated at once instead of waiting it out."""
    clock, leader, fetcher = setup
    fetcher.add(partition(0))
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH), {0: ErrorCode.NOT_LEADER_OR_FOLLOWER})
    clock.advance(BACKOFF / 2)
    assert not leader.outstanding(ApiKey.OFFSET_FOR_LEADER_EPOCH) and not leader.outstanding(ApiKey.FETCH)
    fetcher.add(partition(1))
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    answer_fetch(leader.take(ApiKey.FETCH))
    leader.take(ApiKey.FETCH).d.callback({"error_code": ErrorCode.NONE, "responses": []})  # long poll ended empty
    fetch = leader.take(ApiKey.FETCH)
    assert partitions_in(fetch) == [1]
    clock.advance(BACKOFF / 2)
    answer_fetch(fetch)
    assert partitions_in(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)) == [0]


def test_a_lone_refused_truncation_is_retried_after_one_back_off(setup) -> None:
    clock, leader, fetcher = setup
    fetcher.add(partition(0))
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH), {0: ErrorCode.UNKNOWN_LEADER_EPOCH})
    clock.advance(BACKOFF - 0.01)
    assert not leader.outstanding(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    clock.advance(0.01)
    assert partitions_in(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)) == [0]


class OfflineLog(FakeLog):
    """A follower log whose dir failed: every storage operation raises KafkaStorageError."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        raise KafkaStorageError("log dir offline")

    def truncate_to(self, offset: int) -> None:
        raise KafkaStorageError("log dir offline")


def test_a_partition_whose_log_dir_failed_is_delayed_alone(setup) -> None:
    """A follower's log dir fails (KafkaStorageError from its log): only that partition waits a
    back-off; the fetcher keeps its connection and fetches the others at once (the broker then
    stops following the failed one)."""
    clock, leader, fetcher = setup
    broken = partition(0)
    broken.log = OfflineLog(10)
    fetcher.add(broken)
    fetcher.add(partition(1))
    req = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    answer_epochs(req)
    fetch = leader.take(ApiKey.FETCH)
    assert partitions_in(fetch) == [1] and fetch.conn is req.conn and not req.conn.closed


def test_a_diverging_epoch_in_a_fetch_answer_truncates_and_refetches_from_there(setup) -> None:
    """KIP-320: the follower's Fetch v12 names the epoch of its last batch; an answer carrying
    ``diverging_epoch`` (epoch 0 ends at 7 on the leader) cuts the log to 7 and the next Fetch
    starts there, with no OffsetForLeaderEpoch round in between."""
    clock, leader, fetcher = setup
    part = partition(0, end=10)
    fetcher.add(part)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))        # the leader's epoch ends at 10
    req = leader.take(ApiKey.FETCH)
    sent = req.body["topics"][0]["partitions"][0]
    assert (sent["fetch_offset"], sent["last_fetched_epoch"]) == (10, 0)
    req.d.callback({"error_code": ErrorCode.NONE, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.NONE, "high_watermark": 10, "log_start_offset": 0,
         "records": None, "diverging_epoch": {"epoch": 0, "end_offset": 7}}]}]})
    assert part.log.log_end_offset == 7 and part.high_watermark == 7
    assert not leader.outstanding(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert leader.take(ApiKey.FETCH).body["topics"][0]["partitions"][0]["fetch_offset"] == 7


def test_the_inter_broker_level_picks_the_followers_fetch_version() -> None:
    """Kafka's rule: from inter.broker.protocol.version 2.7 followers fetch with v12 (diverging
    epoch); below it with v11, so a rolling upgrade from a leader serving Fetch v11 keeps
    replicating until the level is raised."""
    assert [fetch_version(v) for v in ("2.6", "2.6-IV0", "2.7-IV1", "2.8-IV1", "3.0")] == [11, 11, 12, 12, 12]
    old = ReplicaFetcher(1, 2, task.Clock(), {**CONFIG, "inter.broker.protocol.version": "2.6"},
                         lambda broker: ("127.0.0.1", 9))
    assert old.fetch_version == 11


def test_an_incremental_fetch_names_exactly_the_partitions_whose_log_moved(setup) -> None:
    """The fetcher keeps each partition's request entry until its log end, log start or epochs
    move: in a session, an unchanged partition is left out, a moved one is sent with its new
    fields (a log start moved by retention alone included)."""
    clock, leader, fetcher = setup
    parts = [partition(i) for i in range(3)]
    for p in parts:
        fetcher.add(p)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    full = leader.take(ApiKey.FETCH)
    assert partitions_in(full) == [0, 1, 2] and full.body["session_epoch"] == 0
    full.d.callback({"error_code": ErrorCode.NONE, "session_id": 7, "responses": []})
    nothing = leader.take(ApiKey.FETCH)
    assert nothing.body["session_id"] == 7 and partitions_in(nothing) == []
    parts[1].log.log_start_offset = 4
    parts[2].log.log_end_offset = 12
    answer_fetch(nothing)
    moved = leader.take(ApiKey.FETCH)
    assert partitions_in(moved) == [1, 2]
    sent = {p["partition"]: p for t in moved.body["topics"] for p in t["partitions"]}
    assert (sent[1]["log_start_offset"], sent[1]["fetch_offset"]) == (4, 10) and sent[2]["fetch_offset"] == 12
    answer_fetch(moved)
    assert partitions_in(leader.take(ApiKey.FETCH)) == []


# -- the round's error handling (the loop is plain callbacks: each wait's callback takes the next step)

class BrokenLog(FakeLog):
    """A log whose log-start move fails with an error that is not a KafkaStorageError."""

    def delete_records_before(self, offset: int, now: int) -> None:
        raise OSError("disk on fire")


def test_an_error_while_applying_an_answer_fails_the_round_backs_off_and_reconnects(setup) -> None:
    """Handling the answer raised: as a failed request, the connection is dropped, every
    partition waits one back-off, and the next Fetch goes out on a new connection."""
    clock, leader, fetcher = setup
    part = partition(0)
    part.log = BrokenLog(10)
    fetcher.add(part)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    req = leader.take(ApiKey.FETCH)
    req.d.callback({"error_code": ErrorCode.NONE, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.NONE, "high_watermark": 10, "log_start_offset": 5,
         "records": None}]}]})
    assert req.conn.closed and fetcher.looping
    clock.advance(BACKOFF - 0.01)
    assert not leader.outstanding(ApiKey.FETCH)
    clock.advance(0.01)
    again = leader.take(ApiKey.FETCH)
    assert partitions_in(again) == [0] and again.conn is not req.conn


def test_a_refused_connection_backs_off_then_connects_again(setup) -> None:
    clock, leader, fetcher = setup
    connect = leader.connect
    attempts: list[float] = []

    def refuse_once(*args: Any) -> defer.Deferred:
        attempts.append(clock.seconds())
        return defer.fail(ConnectionRefusedError()) if len(attempts) == 1 else connect(*args)
    fetcher.connect = refuse_once
    fetcher.add(partition(0))
    clock.advance(0)
    assert attempts == [0] and not leader.requests
    clock.advance(BACKOFF)
    answer_epochs(leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH))
    assert attempts == [0, BACKOFF] and partitions_in(leader.take(ApiKey.FETCH)) == [0]


def test_a_failed_truncation_request_backs_off_and_truncates_again_on_a_new_connection(setup) -> None:
    clock, leader, fetcher = setup
    fetcher.add(partition(0))
    first = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    first.d.errback(ConnectionLost("reset"))
    assert first.conn.closed and not leader.outstanding(ApiKey.FETCH)
    clock.advance(BACKOFF)
    retry = leader.take(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert partitions_in(retry) == [0] and retry.conn is not first.conn
    answer_epochs(retry)
    assert partitions_in(leader.take(ApiKey.FETCH)) == [0]


def test_a_failed_fetch_request_starts_the_session_over_with_a_full_fetch(setup) -> None:
    """KIP-227: after a failed request the leader may or may not have moved the session's epoch,
    so the next Fetch is a full one (epoch 0, every partition named)."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0, 1)
    leader.take(ApiKey.FETCH).d.callback({"error_code": ErrorCode.NONE, "session_id": 7, "responses": []})
    incremental = leader.take(ApiKey.FETCH)
    assert incremental.body["session_id"] == 7 and partitions_in(incremental) == []
    incremental.d.errback(ConnectionLost("reset"))
    clock.advance(BACKOFF)
    full = leader.take(ApiKey.FETCH)
    assert full.body["session_epoch"] == 0 and partitions_in(full) == [0, 1]


def test_stop_during_a_parked_fetch_closes_the_connection_and_ends_the_loop(setup) -> None:
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    parked = leader.take(ApiKey.FETCH)
    fetcher.stop()
    assert parked.conn.closed
    parked.d.errback(ConnectionLost("closed"))
    clock.advance(BACKOFF * 2)
    assert not fetcher.looping and not leader.outstanding(ApiKey.FETCH) and len(leader.conns) == 1


def test_answers_that_arrive_at_once_do_not_nest_one_call_per_round(setup) -> None:
    """A connection may answer a request before ``request`` returns (a Deferred already fired):
    the loop takes the next round itself, so thousands of such rounds in a row (here more than
    Python's recursion limit) neither recurse nor stop the fetcher."""
    clock, leader, fetcher = setup
    follow_and_truncate(clock, leader, fetcher, 0)
    rounds = sys.getrecursionlimit() * 2
    parked = leader.take(ApiKey.FETCH)
    conn = parked.conn
    queued = conn.request

    def answer_at_once(api: int, version: int, body: dict[str, Any], timeout: float) -> defer.Deferred:
        if len(leader.requests) >= rounds:
            return queued(api, version, body, timeout)       # from here on the leader parks them
        d = defer.succeed({"error_code": ErrorCode.NONE, "responses": []})
        leader.requests.append(SimpleNamespace(conn=conn, api=api, body=body, d=d))
        return d
    conn.request = answer_at_once
    parked.d.callback({"error_code": ErrorCode.NONE, "responses": []})
    assert len(leader.requests) == rounds + 1           # the last one is parked
    assert fetcher.looping and not conn.closed and leader.take(ApiKey.FETCH).conn is conn
