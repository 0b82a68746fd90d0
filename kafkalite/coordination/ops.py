"""Multi-op (transaction) operations and typed outcomes of conditional writes.

Plain data, so Kafka-domain code builds transactions without touching kazoo.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


Op = Union[CreateOp, SetDataOp, CheckOp, DeleteOp]


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A decoded znode payload with the zkVersion to pass back on a conditional write."""

    value: T
    version: int


@dataclass(frozen=True)
class Updated:
    """A conditional setData succeeded; ``stat.version`` is the new zkVersion."""

    stat: Any

    @property
    def version(self) -> int:
        return int(self.stat.version)


@dataclass(frozen=True)
class BadVersion:
    """A conditional setData lost: the znode was no longer at ``expected_version``."""

    path: str
    expected_version: int


ConditionalSetResult = Union[Updated, BadVersion]
