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
