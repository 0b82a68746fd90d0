"""PipelinedDataWatch's first read against a client that never answers it and then stops."""
from __future__ import annotations

import threading
from typing import Any, Callable

from kazoo.protocol.states import KeeperState

from kafkalite.coordination.data_watch import PipelinedDataWatch


class _SilentClient:
    """Takes reads and never completes them, as a client whose connection is down does."""

    def __init__(self) -> None:
        self.client_state = KeeperState.CONNECTING
        self.listeners: list[Callable[[str], None]] = []
        self.reads = 0

    def add_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.remove(listener)

    def get_async(self, path: str, watch: Any) -> Any:
        self.reads += 1

        class _Pending:
            def rawlink(self, callback: Any) -> None:
                pass

        return _Pending()


def test_the_first_read_gives_up_when_the_client_stops() -> None:
    client = _SilentClient()
    delivered: list[Any] = []
    built: list[PipelinedDataWatch] = []
    t = threading.Thread(target=lambda: built.append(
        PipelinedDataWatch(client, "/brokers/ids/1", lambda d, s: delivered.append(d))))  # type: ignore[arg-type]
    t.start()
    t.join(0.7)
    assert t.is_alive(), "the constructor must wait for its first delivery"
    client.client_state = KeeperState.CLOSED          # what KazooClient.stop() leaves
    t.join(5)
    assert not t.is_alive()
    assert client.reads == 1 and delivered == []
    assert client.listeners == [], "a watch that gave up must not re-read on the next reconnection"
    built[0]._read()
    assert client.reads == 1
