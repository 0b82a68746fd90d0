"""Local clusters as plain processes: ZooKeeper (Debian's jar) and kafkalite brokers.

Used by the ``kafkalite-cluster`` tool (``python -m kafkalite.cluster``), the demo, the
benchmarks and the test harness, so all of them start, wait for and stop a cluster the same way.
"""
from kafkalite.cluster.local import DEFAULT_FIRST_ID, STATE_FILE, ClusterStatus, LocalCluster, PartitionStatus
from kafkalite.cluster.processes import (BrokerProcess, ClusterError, ZooKeeperProcess, free_port,
                                         port_in_use, wait_until)

__all__ = ["LocalCluster", "ClusterStatus", "PartitionStatus", "BrokerProcess", "ZooKeeperProcess",
           "ClusterError", "free_port", "port_in_use", "wait_until", "DEFAULT_FIRST_ID", "STATE_FILE"]
