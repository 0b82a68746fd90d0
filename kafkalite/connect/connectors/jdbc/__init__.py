"""Confluent's JDBC source and sink connectors (kafka-connect-jdbc's configuration) on SQLAlchemy.

PostgreSQL (through psycopg 3) and SQLite are the databases they are tested against.
"""
from .sink import JdbcSinkConnector, JdbcSinkTask
from .source import JdbcSourceConnector, JdbcSourceTask

__all__ = ["JdbcSourceConnector", "JdbcSourceTask", "JdbcSinkConnector", "JdbcSinkTask"]
