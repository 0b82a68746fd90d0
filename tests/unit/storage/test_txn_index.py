"""The aborted-transaction index (``.txnindex``): Kafka's 34-byte entries, checked against a list."""
from __future__ import annotations

import os
import random
import struct

import pytest

from kafkalite.storage.index import CorruptIndexError
from kafkalite.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

pytestmark = pytest.mark.unit


def test_entry_is_kafkas_34_byte_layout(tmp_path):
    """One entry on disk is version 0, producer id, first offset, last offset, LSO, big-endian,
    and the file only appears with its first entry (Kafka creates it lazily too)."""
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path)
    idx.reset()
    assert not os.path.exists(path)
    idx.append(AbortedTxn(7, 10, 15, 12))
    idx.close()
    with open(path, "rb") as f:
        data = f.read()
    assert ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 10, 15, 12)


@pytest.mark.parametrize("seed", range(3))
def test_random_appends_truncations_and_reloads_match_a_list(tmp_path, seed):
    """Appends, truncations and reloads from disk keep exactly the oracle's entries; collect()
    returns every overlapping entry up to the first whose LSO reaches the upper bound."""
    rng = random.Random(seed)
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path)
    oracle: list[AbortedTxn] = []
    last = 100
    for _ in range(400):
        op = rng.random()
        if op < 0.5:
            last += rng.randint(1, 20)
            first = last - rng.randint(0, 30)
            txn = AbortedTxn(rng.randint(0, 5), first, last, rng.randint(first, last + 1))
            idx.append(txn)
            oracle.append(txn)
        elif op < 0.6 and oracle:
            cut = rng.randint(oracle[0].last_offset - 5, last + 2)
            idx.truncate_to(cut)
            oracle = [t for t in oracle if t.last_offset < cut]
            last = max([t.last_offset for t in oracle], default=100)
        elif op < 0.7:
            idx.close()
            idx = TransactionIndex(path)
            idx.load()
        else:
            lo = rng.randint(80, last + 5)
            hi = rng.randint(lo, last + 30)
            expect = []
            complete = False
            for t in oracle:
                if t.last_offset >= lo and t.first_offset < hi:
                    expect.append(t)
                if t.last_stable_offset >= hi:
                    complete = True
                    break
            assert idx.collect(lo, hi) == (expect, complete)
        assert idx.entries == oracle
    idx.append(AbortedTxn(1, last + 1, last + 1, last + 2))
    with pytest.raises(ValueError):            # markers only move forward
        idx.append(AbortedTxn(1, last, last + 1, last + 2))
    idx.close()


@pytest.mark.parametrize("damage", ["torn", "version", "order"])
def test_damaged_file_is_corrupt(tmp_path, damage):
    """A torn entry, an unknown version or entries out of marker order make load() refuse the
    file (the log then rebuilds it from the segment's markers)."""
    path = str(tmp_path / "00000000000000000000.txnindex")
    good = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)]
    data = b"".join(t.encode() for t in good)
    if damage == "torn":
        data = data[:-3]
    elif damage == "version":
        data = data[:ENTRY_SIZE] + b"\x00\x01" + data[ENTRY_SIZE + 2:]
    else:
        data = good[1].encode() + good[0].encode()
    with open(path, "wb") as f:
        f.write(data)
    idx = TransactionIndex(path)
    with pytest.raises(CorruptIndexError):
        idx.load()
