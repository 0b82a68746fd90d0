"""kafkalite's own transactional producer (Producer(transactional_id=...)) against a real broker:
committed records reach read_committed consumers and aborted ones do not, consumed offsets sent
with send_offsets_to_transaction become the group's committed offsets only on commit, a second
producer of the same id fences the first, and misuse answers a ClientError, never a hang."""
from __future__ import annotations

import uuid

import pytest

from kafkalite.client import Admin, ClientError, Consumer, ConsumerGroupMetadata, NewTopic, Producer, TopicPartition
from kafkalite.errors import ErrorCode
from tests.support.waiting import wait_for


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    with Admin(bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}


def values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[bytes]:
    """Every value up to the end offsets a consumer with ``isolation`` reports (the LSO for
    read_committed), waiting until at least ``expected`` arrived."""
    with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list[bytes] = []
        wait_for(lambda: out.extend(r.value for r in c.poll(200)) or len(out) >= expected, 30,
                 f"{expected} {isolation} records")
        out.extend(r.value for r in c.poll(300))
        return sorted(out)


def test_commit_and_abort(broker) -> None:
    """Two committed and one aborted transaction over two partitions: read_committed returns the
    committed records only, read_uncommitted all of them."""
    topic = unique("ctx")
    create(broker.bootstrap, topic)
    with Producer(broker.bootstrap, transactional_id=unique("tx"), linger_ms=5) as p:
        assert p.acks == -1 and p.idempotent
        p.init_transactions()
        for n, commit in enumerate([True, False, True]):
            p.begin_transaction()
            futures = [p.send(topic, b"t%d-%d" % (n, i), partition=i % 2) for i in range(6)]
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            assert all(f.result(5).offset >= 0 for f in futures)
    committed = sorted(b"t%d-%d" % (n, i) for n in (0, 2) for i in range(6))
    wait_for(lambda: values(broker.bootstrap, topic, 2, "read_committed", 12) == committed, 30, "committed records")
    assert len(values(broker.bootstrap, topic, 2, "read_uncommitted", 18)) == 18


@pytest.mark.parametrize("commit", [True, False])
def test_send_offsets_to_transaction(broker, commit: bool) -> None:
    """Consume-transform-produce: a group consumer's positions sent with
    send_offsets_to_transaction (TxnOffsetCommit with its generation and member) are the group's
    committed offsets after a commit, and not after an abort."""
    src, dst, group = unique("src"), unique("dst"), unique("grp")
    create(broker.bootstrap, src, 1)
    create(broker.bootstrap, dst, 1)
    with Producer(broker.bootstrap, acks="all") as feed:
        for i in range(5):
            feed.send(src, b"in%d" % i, partition=0)
    with Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  isolation_level="read_committed") as c, \
            Producer(broker.bootstrap, transactional_id=unique("ctp")) as p:
        c.subscribe([src])
        got: list = []
        wait_for(lambda: got.extend(c.poll(200)) or len(got) >= 5, 30, "the input")
        meta = c.group_metadata()
        assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id
        p.init_transactions()
        p.begin_transaction()
        for r in got:
            p.send(dst, r.value.upper(), partition=0)
        p.send_offsets_to_transaction({TopicPartition(src, 0): got[-1].offset + 1}, meta)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
        committed = p.client.offset_fetch(group, [TopicPartition(src, 0)])[TopicPartition(src, 0)][0]
        assert committed == (5 if commit else -1)
        # a stale generation is refused by TxnOffsetCommit v3 and leaves the transaction abortable
        p.begin_transaction()
        with pytest.raises(ClientError) as err:
            p.send_offsets_to_transaction({TopicPartition(src, 0): 1},
                                          ConsumerGroupMetadata(group, meta.generation_id + 7, meta.member_id))
        assert err.value.code == ErrorCode.ILLEGAL_GENERATION
        with pytest.raises(ClientError):
            p.commit_transaction(10)
        p.abort_transaction(30)
    out = values(broker.bootstrap, dst, 1, "read_committed", 5 if commit else 0)
    assert out == ([b"IN%d" % i for i in range(5)] if commit else [])


def test_a_second_producer_fences_the_first(broker) -> None:
    """init_transactions of a second producer with the same id bumps the epoch: the first one's
    commit fails with a fencing error and every later call of it raises; the second commits."""
    topic, txn_id = unique("fence"), unique("tx")
    create(broker.bootstrap, topic, 1)
    with Producer(broker.bootstrap, transactional_id=txn_id) as p1, \
            Producer(broker.bootstrap, transactional_id=txn_id) as p2:
        p1.init_transactions()
        p1.begin_transaction()
        p1.send(topic, b"zombie", partition=0)
        p1.flush(10)
        p2.init_transactions()            # aborts p1's open transaction, fences its epoch
        assert p2.producer_epoch > p1.producer_epoch
        with pytest.raises(ClientError) as err:
            p1.commit_transaction(10)
        assert err.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        with pytest.raises(ClientError):
            p1.begin_transaction()
        p2.begin_transaction()
        p2.send(topic, b"live", partition=0)
        p2.commit_transaction(30)
    assert values(broker.bootstrap, topic, 1, "read_committed", 1) == [b"live"]


def test_misuse_answers_client_errors(broker) -> None:
    """Sending or committing outside a transaction, or before init_transactions, is a
    ClientError (INVALID_TXN_STATE); transactional calls on a plain producer too; acks=1 with a
    transactional id is refused."""
    topic = unique("misuse")
    create(broker.bootstrap, topic, 1)
    with Producer(broker.bootstrap, transactional_id=unique("tx")) as p:
        with pytest.raises(ClientError) as err:
            p.begin_transaction()
        assert err.value.code == ErrorCode.INVALID_TXN_STATE
        p.init_transactions()
        with pytest.raises(ClientError):
            p.send(topic, b"x", partition=0)
        with pytest.raises(ClientError):
            p.commit_transaction()
        p.begin_transaction()
        p.commit_transaction()            # an empty transaction: nothing to end at the coordinator
    with Producer(broker.bootstrap) as plain:
        with pytest.raises(ClientError):
            plain.begin_transaction()
    with pytest.raises(ClientError):
        Producer(broker.bootstrap, transactional_id="x", acks=1)


def test_console_consumer_isolation_level(broker) -> None:
    """kafkalite-console-consumer reads committed records only with --isolation-level
    read_committed or --consumer-property isolation.level=read_committed (the option wins over
    the property), all records by default; a bad level is a one-line error."""
    import subprocess
    import sys

    topic = unique("cc")
    create(broker.bootstrap, topic, 1)
    with Producer(broker.bootstrap, transactional_id=unique("tx")) as p:
        p.init_transactions()
        for n, commit in enumerate([True, False]):
            p.begin_transaction()
            p.send(topic, b"v%d" % n, partition=0)
            p.commit_transaction(30) if commit else p.abort_transaction(30)
        p.begin_transaction()
        p.send(topic, b"open", partition=0)
        p.flush(10)

        def consume(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "kafkalite.cli.console_consumer", "--bootstrap-server",
                                   broker.bootstrap, "--topic", topic, "--from-beginning", "--timeout-ms", "3000",
                                   *args], capture_output=True, text=True, timeout=60)

        r = consume("--isolation-level", "read_committed")
        assert r.returncode == 0 and r.stdout.split() == ["v0"], r.stderr
        r = consume("--consumer-property", "isolation.level=read_committed")
        assert r.returncode == 0 and r.stdout.split() == ["v0"], r.stderr
        r = consume("--consumer-property", "isolation.level=read_committed", "--isolation-level", "read_uncommitted")
        assert r.stdout.split() == ["v0", "v1", "open"], r.stderr
        assert consume().stdout.split() == ["v0", "v1", "open"]
        r = consume("--consumer-property", "isolation.level=serializable")
        assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "isolation.level" in r.stderr
        p.abort_transaction(30)


def test_kafkalite_transactions_tool(broker) -> None:
    """kafkalite-transactions: ``list`` names an open transaction Ongoing and a finished one
    CompleteCommit with its coordinator and producer id; ``describe`` shows the open one's epoch,
    timeout, start time and partitions; ``describe-producers`` shows the partition's producers with
    the open transaction's first offset and the coordinator epoch of the finished one's marker;
    unknown ids, topics and partitions are one-line errors."""
    import subprocess
    import sys

    def tool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kafkalite.cli.transactions", "--bootstrap-server",
                               broker.bootstrap, *args], capture_output=True, text=True, timeout=60)

    topic, done_id, open_id = unique("tt"), unique("done"), unique("open")
    create(broker.bootstrap, topic, 2)
    with Producer(broker.bootstrap, transactional_id=done_id) as done, \
            Producer(broker.bootstrap, transactional_id=open_id, transaction_timeout_ms=120000) as hanging:
        done.init_transactions()
        done.begin_transaction()
        done.send(topic, b"a", partition=0)
        done.commit_transaction(30)
        hanging.init_transactions()
        hanging.begin_transaction()
        hanging.send(topic, b"b", partition=0)
        hanging.send(topic, b"c", partition=1)
        hanging.flush(10)
        first_open = None

        r = tool("list")
        assert r.returncode == 0, r.stderr
        lines = [line.split("\t") for line in r.stdout.splitlines()]
        assert lines[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        rows = {row[0]: row[1:] for row in lines[1:]}
        assert rows[open_id] == [str(broker.broker_id), str(hanging.producer_id), "Ongoing"]
        assert rows[done_id] == [str(broker.broker_id), str(done.producer_id), "CompleteCommit"]

        r = tool("describe", "--transactional-id", open_id)
        assert r.returncode == 0, r.stderr
        header, row = [line.split("\t") for line in r.stdout.splitlines()]
        d = dict(zip(header, row))
        assert d["TransactionalId"] == open_id and d["TransactionState"] == "Ongoing"
        assert (d["ProducerId"], d["ProducerEpoch"]) == (str(hanging.producer_id), str(hanging.producer_epoch))
        assert d["TransactionTimeoutMs"] == "120000" and int(d["TransactionDurationMs"]) >= 0
        assert d["TopicPartitions"] == f"{topic}-0,{topic}-1"

        r = tool("describe-producers", "--topic", topic, "--partition", "0")
        assert r.returncode == 0, r.stderr
        lines = [line.split("\t") for line in r.stdout.splitlines()]
        assert lines[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                            "CurrentTransactionStartOffset"]
        prod = {int(row[0]): row for row in lines[1:]}
        first_open = 2                  # offsets: 0 = done's record, 1 = its COMMIT marker, 2 = "b"
        assert prod[hanging.producer_id][1:4] == [str(hanging.producer_epoch), "-1", "0"]
        assert prod[hanging.producer_id][5] == str(first_open)
        assert prod[done.producer_id][5] == "-1" and int(prod[done.producer_id][2]) >= 0

        for args, needle in ((("describe", "--transactional-id", "nobody"), "not found"),
                             (("describe-producers", "--topic", "no-such-topic", "--partition", "0"), "no-such-topic"),
                             (("describe-producers", "--topic", topic, "--partition", "9"), "partition 9")):
            r = tool(*args)
            assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
        hanging.abort_transaction(30)
