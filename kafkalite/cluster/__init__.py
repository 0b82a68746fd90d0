"""Local clusters as plain processes: ZooKeeper (Debian's jar; one server or an ensemble of 3 or 5)
and kafkalite brokers.

Used by the ``kafkalite-cluster`` tool (``python -m kafkalite.cluster``), the demo, the
benchmarks and the test harness, so all of them start, wait for and stop a cluster the same way.
"""
from kafkalite.cluster.local import (DEFAULT_FIRST_ID, STATE_FILE, ClusterStatus, LocalCluster, PartitionStatus,
                                     ZooKeeperServerStatus)
from kafkalite.cluster.processes import (ENSEMBLE_SIZES, BrokerProcess, ClusterError, QuorumPeer, ZooKeeperEnsemble,
                                         ZooKeeperProcess, free_port, free_ports, port_in_use, wait_until)

__all__ = ["LocalCluster", "ClusterStatus", "PartitionStatus", "ZooKeeperServerStatus", "BrokerProcess",
           "ZooKeeperProcess", "ZooKeeperEnsemble", "QuorumPeer", "ENSEMBLE_SIZES", "ClusterError", "free_port",
           "free_ports", "port_in_use", "wait_until", "DEFAULT_FIRST_ID", "STATE_FILE"]
