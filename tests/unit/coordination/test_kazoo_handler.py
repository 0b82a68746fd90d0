"""The poll-based ``select`` under kazoo's connection thread (``coordination/kazoo_handler.py``):
``select.select``'s contract, on real sockets."""
from __future__ import annotations

import fcntl
import os
import resource
import socket
import time

import pytest

from kafkalite.coordination.kazoo_handler import PollingHandler, poll_select


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    for s in (a, b):
        s.close()


def test_nothing_to_read_times_out_with_empty_lists(pair):
    a, _ = pair
    t0 = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - t0 >= 0.04


def test_readable_and_writable_objects_are_returned_as_given(pair):
    a, b = pair
    b.send(b"x")
    readable, writable, _ = poll_select([a, b.fileno()], [b], [], 1.0)
    assert readable == [a]              # the same object, not its descriptor
    assert writable == [b]


def test_a_closed_peer_counts_as_readable(pair):
    a, b = pair
    b.close()
    readable, _, _ = poll_select([a], [], [], 1.0)
    assert readable == [a]              # recv() then reports the end, as after select.select
    assert a.recv(1) == b""


def test_descriptors_above_1023_work(pair):
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1500:
        pytest.skip("the open-file limit is below 1,501")
    a, b = pair
    # the lowest free descriptor from 1,500 up (dup2 would close one the process holds there);
    # select.select cannot take it
    high = fcntl.fcntl(a.fileno(), fcntl.F_DUPFD, 1500)
    try:
        b.send(b"x")
        assert high >= 1500
        assert poll_select([high], [], [], 1.0)[0] == [high]
    finally:
        os.close(high)


def test_a_negative_timeout_is_refused_not_taken_as_forever(pair):
    a, _ = pair
    with pytest.raises(ValueError):
        poll_select([a], [], [], -1)


def test_the_handler_uses_it(pair):
    a, b = pair
    b.send(b"x")
    assert PollingHandler().select([a], [], [], 1.0)[0] == [a]
