"""PySpark data source ``kafkalite``: Spark's Kafka-source options and schema over kafkalite,
plus committed-offset ranges for consumer groups (see docs/spark.md).

    from spark_integration import register, commit_ranges
    register(spark)
    df = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bs) \\
        .option("subscribe", "trucks_gps").option("groupId", "reports").load()
    ...write the result...
    commit_ranges(spark, df)
"""
from __future__ import annotations

from typing import Any

from spark_integration.planning import DataLossError
from spark_integration.source import KafkaliteDataSource, commit_ranges, ranges_of

__all__ = ["DataLossError", "KafkaliteDataSource", "commit_ranges", "ranges_of", "register"]


def register(spark: Any) -> None:
    """Make ``spark.read.format("kafkalite")`` and ``spark.readStream.format("kafkalite")`` work."""
    spark.dataSource.register(KafkaliteDataSource)
