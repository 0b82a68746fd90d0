"""Connectors shipped with kafkalite: Kafka's FileStream pair (``file``), JDBC and Parquet."""
