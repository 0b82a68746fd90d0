"""zookeeper.connect parsing (hosts list + optional chroot)."""
from __future__ import annotations

import pytest

from kafkalite.coordination.connect_string import parse_connect_string


def test_hosts_and_chroot_split():
    """A trailing /chroot is split off; '/' alone or a trailing '/' means no/normalised chroot."""
    assert parse_connect_string("h1:2181,h2:2182/kafka") == ("h1:2181,h2:2182", "/kafka")
    assert parse_connect_string("h1:2181/a/b/") == ("h1:2181", "/a/b")
    assert parse_connect_string("h1:2181/") == ("h1:2181", None)
    assert parse_connect_string("[::1]:2181,h2") == ("[::1]:2181,h2", None)
    assert str(parse_connect_string("h:1/k")) == "h:1/k"


@pytest.mark.parametrize("bad", ["", "/kafka", "h:1,,h:2", "h:1/a//b", "h:1/a/../b", "h:abc"])
def test_bad_connect_strings(bad):
    """Empty hosts, empty host entries, bad ports and odd chroots are refused."""
    with pytest.raises(ValueError):
        parse_connect_string(bad)
