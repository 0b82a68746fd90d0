"""Parsing of Kafka's ``zookeeper.connect``: ``host1:port1,host2:port2[/chroot]``."""
from __future__ import annotations

import re
from typing import NamedTuple


class ConnectString(NamedTuple):
    hosts: str             # "h1:p1,h2:p2" without the chroot
    chroot: str | None     # "/kafka" or None

    def __str__(self) -> str:
        return self.hosts + (self.chroot or "")


_HOST = re.compile(r"(\[[0-9a-fA-F:.]+\]|[^\s:/,\[\]]+)(:[0-9]{1,5})?")


def parse_connect_string(connect: str) -> ConnectString:
    """Split off the chroot (everything from the first '/') and check each host[:port]."""
    connect = connect.strip()
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect has no hosts: {connect!r}")
    for host in hosts.split(","):
        if not _HOST.fullmatch(host.strip()):
            raise ValueError(f"bad host in zookeeper.connect: {host!r}")
    if not slash:
        return ConnectString(hosts, None)
    chroot = "/" + chroot.rstrip("/")
    if chroot == "/":
        return ConnectString(hosts, None)
    if "//" in chroot or any(p in (".", "..") for p in chroot.split("/")[1:]):
        raise ValueError(f"bad chroot path in zookeeper.connect: {chroot!r}")
    return ConnectString(hosts, chroot)
