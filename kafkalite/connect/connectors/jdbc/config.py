"""The JDBC connectors' configuration, with Confluent's property names (kafka-connect-jdbc).

``connection.url`` may be a JDBC URL as Confluent's connector takes it
(``jdbc:postgresql://host:5432/db``, ``jdbc:sqlite:/path/db``) or an SQLAlchemy URL
(``postgresql+psycopg://...``, ``sqlite:///...``).
"""
from __future__ import annotations

from typing import Any

from ...config import (
    ConfigDef, ConfigException, Importance, NonEmptyString, Range, Type, ValidString, Width,
)

# -- common -----------------------------------------------------------------------------------
CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"
CONNECTION_ATTEMPTS = "connection.attempts"
CONNECTION_BACKOFF = "connection.backoff.ms"
DB_TIMEZONE = "db.timezone"

# -- source -----------------------------------------------------------------------------------
TABLE_WHITELIST = "table.whitelist"
TABLE_BLACKLIST = "table.blacklist"
SCHEMA_PATTERN = "schema.pattern"
TABLE_TYPES = "table.types"
QUERY = "query"
MODE = "mode"
MODE_BULK, MODE_INCREMENTING, MODE_TIMESTAMP, MODE_TIMESTAMP_INCREMENTING = (
    "bulk", "incrementing", "timestamp", "timestamp+incrementing")
INCREMENTING_COLUMN = "incrementing.column.name"
TIMESTAMP_COLUMN = "timestamp.column.name"
TIMESTAMP_DELAY = "timestamp.delay.interval.ms"
TIMESTAMP_INITIAL = "timestamp.initial"
VALIDATE_NON_NULL = "validate.non.null"
TOPIC_PREFIX = "topic.prefix"
POLL_INTERVAL = "poll.interval.ms"
BATCH_MAX_ROWS = "batch.max.rows"
TABLE_POLL_INTERVAL = "table.poll.interval.ms"
NUMERIC_MAPPING = "numeric.mapping"
#: set by the connector in each task's configuration: the tables that task reads
TABLES = "tables"

# -- sink -------------------------------------------------------------------------------------
INSERT_MODE = "insert.mode"
BATCH_SIZE = "batch.size"
DELETE_ENABLED = "delete.enabled"
TABLE_NAME_FORMAT = "table.name.format"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
FIELDS_WHITELIST = "fields.whitelist"
AUTO_CREATE = "auto.create"
AUTO_EVOLVE = "auto.evolve"
MAX_RETRIES = "max.retries"
RETRY_BACKOFF = "retry.backoff.ms"

DATABASE_GROUP, MODE_GROUP, CONNECTOR_GROUP, WRITES_GROUP, DDL_GROUP, RETRIES_GROUP, DATA_MAPPING_GROUP = (
    "Database", "Mode", "Connector", "Writes", "DDL Support", "Retries", "Data Mapping")


def _connection(definition: ConfigDef) -> ConfigDef:
    return (definition
            .define(CONNECTION_URL, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, NonEmptyString(), Importance.HIGH,
                    "JDBC connection URL (jdbc:postgresql://host:port/db, jdbc:sqlite:path) or an SQLAlchemy URL.",
                    DATABASE_GROUP, 1, Width.LONG, "JDBC URL")
            .define(CONNECTION_USER, Type.STRING, None, None, Importance.HIGH, "JDBC connection user.",
                    DATABASE_GROUP, 2, Width.LONG, "JDBC User")
            .define(CONNECTION_PASSWORD, Type.PASSWORD, None, None, Importance.HIGH, "JDBC connection password.",
                    DATABASE_GROUP, 3, Width.SHORT, "JDBC Password")
            .define(CONNECTION_ATTEMPTS, Type.INT, 3, Range.at_least(1), Importance.LOW,
                    "Maximum number of attempts to retrieve a valid JDBC connection.", DATABASE_GROUP, 4,
                    Width.SHORT, "JDBC connection attempts")
            .define(CONNECTION_BACKOFF, Type.LONG, 10000, Range.at_least(0), Importance.LOW,
                    "Backoff time in milliseconds between connection attempts.", DATABASE_GROUP, 5, Width.SHORT,
                    "JDBC connection backoff in milliseconds")
            .define(DB_TIMEZONE, Type.STRING, "UTC", _TimezoneValidator(), Importance.MEDIUM,
                    "Name of the JDBC timezone used in the connector when querying with time-based criteria "
                    "and writing timestamps without a time zone.", DATABASE_GROUP, 6, Width.MEDIUM,
                    "DB time zone"))


class _TimezoneValidator:
    def ensure_valid(self, name: str, value: Any) -> None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        try:
            ZoneInfo(str(value))
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigException(name, value, "Invalid time zone identifier") from None

    def __str__(self) -> str:
        return "Any valid JDK time zone"


def source_config_def() -> ConfigDef:
    return (_connection(ConfigDef())
            .define(TABLE_WHITELIST, Type.LIST, "", None, Importance.MEDIUM,
                    "List of tables to include in copying. If specified, table.blacklist may not be set.",
                    DATABASE_GROUP, 7, Width.LONG, "Table Whitelist")
            .define(TABLE_BLACKLIST, Type.LIST, "", None, Importance.MEDIUM,
                    "List of tables to exclude from copying. If specified, table.whitelist may not be set.",
                    DATABASE_GROUP, 8, Width.LONG, "Table Blacklist")
            .define(SCHEMA_PATTERN, Type.STRING, None, None, Importance.MEDIUM,
                    "Schema from which to fetch table metadata (the database's default schema when unset).",
                    DATABASE_GROUP, 9, Width.SHORT, "Schema pattern")
            .define(TABLE_TYPES, Type.LIST, "TABLE", None, Importance.LOW,
                    "By default, the JDBC connector will only detect tables with type TABLE from the source "
                    "Database. This config allows a command separated list of table types to extract (TABLE, "
                    "VIEW).", DATABASE_GROUP, 10, Width.SHORT, "Table Types")
            .define(MODE, Type.STRING, "", ValidString.in_("", MODE_BULK, MODE_TIMESTAMP, MODE_INCREMENTING,
                                                           MODE_TIMESTAMP_INCREMENTING), Importance.HIGH,
                    "The mode for updating a table each time it is polled: bulk, incrementing, timestamp, "
                    "timestamp+incrementing.", MODE_GROUP, 1, Width.MEDIUM, "Table Loading Mode",
                    dependents=[INCREMENTING_COLUMN, TIMESTAMP_COLUMN, VALIDATE_NON_NULL])
            .define(INCREMENTING_COLUMN, Type.STRING, "", None, Importance.MEDIUM,
                    "The name of the strictly incrementing column to use to detect new rows.", MODE_GROUP, 2,
                    Width.MEDIUM, "Incrementing Column Name")
            .define(TIMESTAMP_COLUMN, Type.LIST, "", None, Importance.MEDIUM,
                    "Comma separated list of one or more timestamp columns to detect new or modified rows using "
                    "the COALESCE SQL function.", MODE_GROUP, 3, Width.MEDIUM, "Timestamp Column Name")
            .define(TIMESTAMP_INITIAL, Type.LONG, None, None, Importance.LOW,
                    "The epoch timestamp (ms) used for initial queries that use timestamp criteria; -1 means "
                    "the current time. Unset: all rows.", MODE_GROUP, 4, Width.MEDIUM, "Unix time value of initial "
                    "timestamp")
            .define(VALIDATE_NON_NULL, Type.BOOLEAN, True, None, Importance.LOW,
                    "By default, the JDBC connector will validate that all incrementing and timestamp tables "
                    "have NOT NULL set for the columns being used as their ID/timestamp.", MODE_GROUP, 5,
                    Width.SHORT, "Validate Non Null")
            .define(QUERY, Type.STRING, "", None, Importance.MEDIUM,
                    "If specified, the query to perform to select new or updated rows.", MODE_GROUP, 6, Width.SHORT,
                    "Query")
            .define(TIMESTAMP_DELAY, Type.LONG, 0, Range.at_least(0), Importance.HIGH,
                    "How long to wait after a row with certain timestamp appears before we include it in the "
                    "result.", CONNECTOR_GROUP, 1, Width.MEDIUM, "Delay Interval (ms)")
            .define(POLL_INTERVAL, Type.INT, 5000, Range.at_least(1), Importance.HIGH,
                    "Frequency in ms to poll for new data in each table.", CONNECTOR_GROUP, 2, Width.SHORT,
                    "Poll Interval (ms)")
            .define(BATCH_MAX_ROWS, Type.INT, 100, Range.at_least(1), Importance.LOW,
                    "Maximum number of rows to include in a single batch when polling for new data.",
                    CONNECTOR_GROUP, 3, Width.SHORT, "Max Rows Per Batch")
            .define(TABLE_POLL_INTERVAL, Type.LONG, 60000, Range.at_least(0), Importance.LOW,
                    "Frequency in ms to poll for new or removed tables, which may result in updated task "
                    "configurations to start polling for data in added tables or stop polling for data in "
                    "removed tables.", CONNECTOR_GROUP, 4, Width.SHORT, "Metadata Change Monitoring Interval (ms)")
            .define(TOPIC_PREFIX, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, None, Importance.HIGH,
                    "Prefix to prepend to table names to generate the name of the Kafka topic to publish data "
                    "to, or in the case of a custom query, the full name of the topic to publish to.",
                    CONNECTOR_GROUP, 5, Width.MEDIUM, "Topic Prefix")
            .define(NUMERIC_MAPPING, Type.STRING, "none", ValidString.in_("none", "precision_only", "best_fit"),
                    Importance.LOW, "Map NUMERIC values by precision and optionally scale to integral or decimal "
                    "types.", CONNECTOR_GROUP, 6, Width.SHORT, "Map Numeric Values, Integral or Decimal, By "
                    "Precision and Scale"))


def sink_config_def() -> ConfigDef:
    return (_connection(ConfigDef())
            .define(INSERT_MODE, Type.STRING, "insert", ValidString.in_("insert", "upsert", "update"),
                    Importance.HIGH, "The insertion mode to use: insert, upsert (ON CONFLICT DO UPDATE on the "
                    "primary key) or update.", WRITES_GROUP, 1, Width.MEDIUM, "Insert Mode")
            .define(BATCH_SIZE, Type.INT, 3000, Range.at_least(0), Importance.MEDIUM,
                    "Specifies how many records to attempt to batch together for insertion into the destination "
                    "table, when possible.", WRITES_GROUP, 2, Width.SHORT, "Batch Size")
            .define(DELETE_ENABLED, Type.BOOLEAN, False, None, Importance.MEDIUM,
                    "Whether to treat null record values as deletes. Requires pk.mode to be record_key.",
                    WRITES_GROUP, 3, Width.SHORT, "Enable deletes")
            .define(TABLE_NAME_FORMAT, Type.STRING, "${topic}", None, Importance.MEDIUM,
                    "A format string for the destination table name, which may contain '${topic}' as a "
                    "placeholder for the originating topic name.", DATA_MAPPING_GROUP, 1, Width.LONG,
                    "Table Name Format")
            .define(PK_MODE, Type.STRING, "none", ValidString.in_("none", "kafka", "record_key", "record_value"),
                    Importance.HIGH, "The primary key mode: none, kafka (__connect_topic, __connect_partition, "
                    "__connect_offset), record_key, record_value.", DATA_MAPPING_GROUP, 2, Width.MEDIUM,
                    "Primary Key Mode")
            .define(PK_FIELDS, Type.LIST, "", None, Importance.MEDIUM,
                    "List of comma-separated primary key field names. The runtime interpretation of this config "
                    "depends on the pk.mode.", DATA_MAPPING_GROUP, 3, Width.LONG, "Primary Key Fields")
            .define(FIELDS_WHITELIST, Type.LIST, "", None, Importance.MEDIUM,
                    "List of comma-separated record value field names. If empty, all fields from the record "
                    "value are utilized, otherwise used to filter to the desired fields.", DATA_MAPPING_GROUP, 4,
                    Width.LONG, "Fields Whitelist")
            .define(AUTO_CREATE, Type.BOOLEAN, False, None, Importance.MEDIUM,
                    "Whether to automatically create the destination table based on record schema if it is "
                    "found to be missing by issuing CREATE.", DDL_GROUP, 1, Width.SHORT, "Auto-Create")
            .define(AUTO_EVOLVE, Type.BOOLEAN, False, None, Importance.MEDIUM,
                    "Whether to automatically add columns in the table schema when found to be missing relative "
                    "to the record schema by issuing ALTER.", DDL_GROUP, 2, Width.SHORT, "Auto-Evolve")
            .define(MAX_RETRIES, Type.INT, 10, Range.at_least(0), Importance.MEDIUM,
                    "The maximum number of times to retry on errors before failing the task.", RETRIES_GROUP, 1,
                    Width.SHORT, "Maximum Retries")
            .define(RETRY_BACKOFF, Type.INT, 3000, Range.at_least(0), Importance.MEDIUM,
                    "The time in milliseconds to wait following an error before a retry attempt is made.",
                    RETRIES_GROUP, 2, Width.SHORT, "Retry Backoff (millis)"))
