"""Filter: drop the record. Used with a predicate (``transforms.x.predicate``) to drop only some."""
from __future__ import annotations

from ..config import ConfigDef
from ..records import ConnectRecord
from .base import Transformation


class Filter(Transformation):
    """org.apache.kafka.connect.transforms.Filter"""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def apply(self, record: ConnectRecord) -> None:
        return None
