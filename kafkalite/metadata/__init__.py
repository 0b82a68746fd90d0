"""What a broker knows of the cluster, as plain data shared by the broker and the controller.

Pure (no Twisted, no kazoo): ``state.LeaderAndIsr`` is the one partition-state type, carried with
its znode version from ZooKeeper through the controller to the partition; ``cache.MetadataCache``
is the served view that handlers read.
"""
from kafkalite.metadata.cache import METADATA_CHANGED, BrokerInfo, MetadataCache, TopicInfo
from kafkalite.metadata.state import NO_LEADER, LeaderAndIsr

__all__ = ["BrokerInfo", "LeaderAndIsr", "METADATA_CHANGED", "MetadataCache", "NO_LEADER", "TopicInfo"]
