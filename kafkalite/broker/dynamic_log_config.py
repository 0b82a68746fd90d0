"""The topic defaults among the dynamic broker configs (Kafka's ``DynamicLogConfig``).

Dynamic broker configs that are the broker synonyms of topic configs (the ``log.*`` properties,
``message.max.bytes``, ``min.insync.replicas``, ...) change every topic without its own override:
on any dynamic change the effective topic configs are recomputed, the log manager's default and
every partition's log config are replaced, and requests waiting on metadata re-check.
"""
from __future__ import annotations

from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.config import BrokerConfig
from kafkalite.metadata import METADATA_CHANGED, MetadataCache
from kafkalite.storage import LogManager


class DynamicLogConfig:
    """Told of every dynamic change (``reconfigurable_configs`` None): which broker property is a
    topic default, and of which synonym, is ``config.TOPIC_KEYS``' business, so it recomputes."""

    reconfigurable_configs = None

    def __init__(self, topic_configs: TopicConfigs, metadata: MetadataCache, log_manager: LogManager,
                 replicas: ReplicaManager, purgatory: Purgatory) -> None:
        self.topic_configs = topic_configs
        self.metadata = metadata
        self.log_manager = log_manager
        self.replicas = replicas
        self.purgatory = purgatory

    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        """Nothing beyond the config table's checks of names and values, as Kafka's
        DynamicLogConfig (topic overrides get no more either)."""

    def reconfigure(self, changed: set[str]) -> None:
        self.topic_configs.clear()
        self.log_manager.default_config = self.topic_configs.log_config(None)
        for topic in list(self.metadata.topics):
            self.replicas.update_config(topic)
        self.purgatory.check(METADATA_CHANGED)
