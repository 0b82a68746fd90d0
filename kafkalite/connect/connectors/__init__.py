"""Connectors shipped with kafkalite (FileStream, JDBC, Parquet)."""
