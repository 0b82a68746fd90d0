"""kafkalite: a Kafka-compatible, ZooKeeper-coordinated streaming broker."""
