"""Each topic's effective configuration: its ZooKeeper overrides over the broker's defaults.

Handlers read the typed values (``min.insync.replicas``, ``max.message.bytes``, ...); storage gets
the same values as a :class:`~kafkalite.storage.LogConfig` built from them (one table, no string
round trip). Both are computed once per set of
overrides and cached, since produce asks on every request.
"""
from __future__ import annotations

from typing import Any

from kafkalite.config import BrokerConfig
from kafkalite.metadata import MetadataCache
from kafkalite.storage import LogConfig


class TopicConfigs:
    def __init__(self, config: BrokerConfig, metadata: MetadataCache) -> None:
        self.config = config
        self.metadata = metadata
        self._cache: dict[str, tuple[dict[str, str], dict[str, Any], LogConfig]] = {}

    def _resolve(self, topic: str | None) -> tuple[dict[str, Any], LogConfig]:
        info = None if topic is None else self.metadata.topics.get(topic)
        overrides = {} if info is None else info.config
        cached = self._cache.get(topic or "")
        if cached is not None and cached[0] == overrides:
            return cached[1], cached[2]
        typed = self.config.topic_config(overrides)
        storage = LogConfig.from_topic_config(typed)
        self._cache[topic or ""] = (dict(overrides), typed, storage)
        return typed, storage

    def effective(self, topic: str | None) -> dict[str, Any]:
        """Typed topic config (Kafka property name -> value); ``None``: the broker's defaults."""
        return self._resolve(topic)[0]

    def log_config(self, topic: str | None) -> LogConfig:
        return self._resolve(topic)[1]

    def forget(self, topic: str) -> None:
        self._cache.pop(topic, None)

    def clear(self) -> None:
        """The broker's defaults changed (dynamic broker configs): recompute every topic."""
        self._cache.clear()
