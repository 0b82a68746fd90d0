"""An ``/admin`` request znode as a watch last read it, with the stat fields that identify it.

The controller acts on ``/admin/preferred_replica_election`` and ``/admin/reassign_partitions``
and deletes them fenced on their version; the mzxid tells a re-created znode from the one already
handled (versions restart at 0). A typed value instead of a tuple read by index.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

_R = TypeVar("_R")


@dataclass(frozen=True)
class AdminZNode(Generic[_R]):
    request: _R          #: the decoded payload (zk_schema.admin)
    version: int         #: the znode's version when read
    mzxid: int = -1      #: the zxid of its last change (-1: not tracked)
