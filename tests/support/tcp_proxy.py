"""A loopback TCP proxy whose link can be cut and restored: a connection loss on demand.

Tests put it between one ZooKeeper client and the real server, so "the network dropped" is a
real socket close seen by kazoo (SUSPENDED, requests re-sent after reconnect, and a session
that expires while cut is reported LOST on restore), without pausing the shared ZooKeeper.
While cut, new connections are accepted and closed at once (kazoo keeps retrying). Blocking
threads: test support only, never on a reactor thread.
"""
from __future__ import annotations

import logging
import selectors
import socket
import threading

log = logging.getLogger(__name__)


class TcpProxy:
    """127.0.0.1:<port> -> ``upstream``; ``cut()`` drops every link, ``restore()`` lets new ones in."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._cut = False
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"tcp-proxy-{self.port}",
                                        daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Close every proxied connection (both ends) and refuse new ones until restore()."""
        with self._lock:
            self._cut = True
            links, self._links = self._links, []
        for pair in links:
            for s in pair:
                _close(s)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)
        self._thread.join(5)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refuse = self._cut
            if refuse:
                _close(downstream)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(downstream)
                continue
            with self._lock:
                if self._cut:
                    _close(downstream)
                    _close(upstream)
                    continue
                self._links.append((downstream, upstream))
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True,
                             name=f"tcp-proxy-{self.port}-pump").start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        """Copy bytes both ways until either side closes (or cut() closes both)."""
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in sel.select(timeout=1.0):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = src.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return  # a cut closes the sockets under us
        finally:
            sel.close()
            for s in (a, b):
                _close(s)
            with self._lock:
                if (a, b) in self._links:
                    self._links.remove((a, b))


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


__all__ = ["TcpProxy"]
