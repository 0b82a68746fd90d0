"""Ports chosen for a local cluster's processes stay distinct until those processes bind them.

The kernel offers a port again as soon as the probe socket closes; a demo once gave its schema
registry the election port already chosen for ZooKeeper server 1, which had not bound it yet, and
the registry failed to start.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalite.cluster import processes
from kafkalite.cluster.processes import free_port, free_ports

pytestmark = pytest.mark.unit


def test_a_port_handed_out_is_not_offered_again_while_unbound() -> None:
    first = free_ports(9)
    later = [free_port() for _ in range(40)]
    assert len(set(first + later)) == 49


def test_a_kernel_offer_already_handed_out_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the kernel offers, an already handed-out port is passed over for the next offer."""
    offers = iter([40001, 40001, 40002])

    class Probe:
        def __init__(self) -> None:
            self.port = 0

        def __enter__(self) -> "Probe":
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def bind(self, address: tuple[str, int]) -> None:
            self.port = next(offers)

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(processes, "socket", SimpleNamespace(socket=lambda *a, **k: Probe()))
    monkeypatch.setattr(processes, "_HANDED_OUT", {})
    assert free_port() == 40001
    assert free_port() == 40002


def test_ports_come_from_outside_the_kernels_ephemeral_range(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: object) -> None:
    """Outgoing connections take their local ports from the ephemeral range; a port chosen there
    could be taken by any client before the broker binds it (CI saw "Address already in use")."""
    from pathlib import Path
    range_file = Path(str(tmp_path)) / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "_EPHEMERAL_RANGE_FILE", range_file)
    assert processes.unassigned_port_range() == range(10000, 32768)
    ports = free_ports(20)
    assert all(10000 <= p < 32768 for p in ports), ports
    range_file.write_text("1024\t30000\n")       # a machine whose ephemeral range starts low
    assert processes.unassigned_port_range() == range(30001, 65536)
    assert all(p > 30000 for p in free_ports(5))
    range_file.write_text("1024\t65000\n")       # no room outside it: the kernel's choice
    assert processes.unassigned_port_range() == range(0)
    assert len(set(free_ports(3))) == 3


def test_a_taken_candidate_is_passed_over(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """A port some process listens on is never handed out: the candidates drawn first are ports
    this test holds (kernel-chosen, so no other test's candidates are disturbed)."""
    import random
    import socket
    holders = [socket.socket() for _ in range(3)]
    for s in holders:
        s.bind(("127.0.0.1", 0))
        s.listen()
    taken = [s.getsockname()[1] for s in holders]
    from pathlib import Path
    range_file = Path(str(tmp_path)) / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "_EPHEMERAL_RANGE_FILE", range_file)
    draws = iter(taken)
    real = random.Random()
    monkeypatch.setattr(processes, "_random", SimpleNamespace(
        choice=lambda seq: next(draws, None) or real.choice(seq)))
    try:
        chosen = free_ports(4)
        assert next(draws, None) is None, "the held ports were not drawn first"
        assert not set(taken) & set(chosen) and len(set(chosen)) == 4
    finally:
        for s in holders:
            s.close()
