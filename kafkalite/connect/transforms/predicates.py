"""Kafka 2.8's predicates (KIP-585): TopicNameMatches, HasHeaderKey, RecordIsTombstone."""
from __future__ import annotations

import re

from ..config import AbstractConfig, ConfigDef, Importance, NonEmptyString, Type
from ..records import ConnectRecord
from .base import Predicate
from .regex_router import _RegexValidator


class TopicNameMatches(Predicate):
    """org.apache.kafka.connect.transforms.predicates.TopicNameMatches: the whole topic name matches ``pattern``."""

    def __init__(self) -> None:
        self.pattern: re.Pattern[str] = re.compile("")

    def config(self) -> ConfigDef:
        return ConfigDef().define("pattern", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, _RegexValidator(),
                                  Importance.MEDIUM, "A Java regular expression for matching against the name of "
                                  "a record's topic.")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.pattern = re.compile(config.get("pattern"))

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """org.apache.kafka.connect.transforms.predicates.HasHeaderKey: a header named ``name`` is present."""

    def __init__(self) -> None:
        self.name = ""

    def config(self) -> ConfigDef:
        return ConfigDef().define("name", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, NonEmptyString(),
                                  Importance.MEDIUM, "The header name.")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.name = config.get("name")

    def test(self, record: ConnectRecord) -> bool:
        return bool(record.headers.all_with_name(self.name))


class RecordIsTombstone(Predicate):
    """org.apache.kafka.connect.transforms.predicates.RecordIsTombstone: the value is null."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
