"""Transactions seen from other processes: kcat (librdkafka's CLI) reading read_committed and
read_uncommitted, and a transactional producer process killed with SIGKILL in the middle of its
transaction, which the coordinator aborts after transaction.timeout.ms so the last stable offset
moves on and read_committed consumers never see its records."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.interop.interop_support import kcat
from tests.support.topics import create_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.interop


def kcat_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value kcat -C -e prints from the beginning with ``isolation.level``."""
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\\n",
               "-X", f"isolation.level={isolation}", timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    return out.stdout.split()


def lso(bootstrap: str, topic: str) -> int:
    """The read_committed end offset of partition 0 (the broker's last stable offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-probe", "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()


def test_kcat_reads_committed_only_with_isolation_level_read_committed(broker: Any) -> None:
    """Committed, aborted, committed, then an open transaction followed by a plain record: kcat with
    -X isolation.level=read_committed prints the committed records only and stops at the open
    transaction (the LSO), read_uncommitted prints everything; after the abort, read_committed
    also reaches the plain record."""
    topic = f"kcat-txn-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for n, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=b"t%d-%d" % (n, i), partition=0)
        p.flush(30)                     # librdkafka's abort purges records not yet sent
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"plain", partition=0)
    assert plain.flush(30) == 0

    committed = [b"t%d-%d" % (n, i) for n in (0, 2) for i in range(5)]
    wait_for(lambda: kcat_values(broker.bootstrap, topic, "read_committed") == committed, 30,
             "kcat read_committed to show the committed transactions")
    assert kcat_values(broker.bootstrap, topic, "read_uncommitted") == \
        [b"t%d-%d" % (n, i) for n in range(3) for i in range(5)] + [b"open", b"plain"]
    p.abort_transaction(30)
    wait_for(lambda: kcat_values(broker.bootstrap, topic, "read_committed") == committed + [b"plain"], 30,
             "the abort to release the plain record")
    del p, plain


PRODUCER_SCRIPT = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 6000})
p.init_transactions(30)
p.begin_transaction()
for i in range(20):
    p.produce(topic, value=b"doomed-%d" % i, partition=0)
p.flush(30)
print("READY", flush=True)
time.sleep(600)
"""


def test_a_killed_producers_transaction_is_aborted_after_its_timeout(cluster_factory: Any) -> None:
    """A producer process with an open transaction (transaction.timeout.ms 6000) is killed with
    SIGKILL after its records are written: the LSO stays at the transaction's first offset while
    the transaction is open, then the coordinator aborts it (abort check every 500 ms) and the LSO
    passes the ABORT marker and a plain record written after it; read_committed (kcat) never shows
    the killed producer's records, read_uncommitted does; its id is CompleteAbort."""
    cluster = cluster_factory(1, {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    bs = cluster.bootstrap
    topic, txn_id = f"kill-txn-{uuid.uuid4().hex[:6]}", f"doomed-{uuid.uuid4().hex[:6]}"
    create_topic(bs, topic)
    first = Producer({"bootstrap.servers": bs, "transactional.id": f"ok-{topic}"})
    first.init_transactions(30)
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, value=b"ok-%d" % i, partition=0)
    first.commit_transaction(30)                        # offsets 0-2 and the COMMIT marker at 3
    del first

    proc = subprocess.Popen([sys.executable, "-c", PRODUCER_SCRIPT, bs, topic, txn_id], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        plain = Producer({"bootstrap.servers": bs})
        plain.produce(topic, value=b"after", partition=0)
        assert plain.flush(30) == 0                     # offset 24
        assert lso(bs, topic) == 4, "the open transaction holds the LSO at its first offset"
        assert kcat_values(bs, topic, "read_committed") == [b"ok-0", b"ok-1", b"ok-2"]
        wait_for(lambda: lso(bs, topic) == 26, 60, "the coordinator to abort the dead producer's transaction")
        assert time.monotonic() - killed_at >= 2, "aborted long before transaction.timeout.ms"
        assert kcat_values(bs, topic, "read_committed") == [b"ok-0", b"ok-1", b"ok-2", b"after"]
        assert kcat_values(bs, topic, "read_uncommitted") == \
            [b"ok-%d" % i for i in range(3)] + [b"doomed-%d" % i for i in range(20)] + [b"after"]
        r = subprocess.run([sys.executable, "-m", "kafkalite.cli.transactions", "--bootstrap-server", bs,
                            "describe", "--transactional-id", txn_id], capture_output=True, text=True, timeout=60)
        header, row = [line.split("\t") for line in r.stdout.splitlines()]
        assert dict(zip(header, row))["TransactionState"] == "CompleteAbort", r.stdout + r.stderr
        del plain
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
