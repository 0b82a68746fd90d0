"""Confluent's JDBC source connector on SQLAlchemy (io.confluent.connect.jdbc.JdbcSourceConnector).

The connector lists the tables (table.whitelist / table.blacklist / table.types) and spreads
them over up to tasks.max tasks (a custom ``query`` is one task); a monitor thread re-lists them
every table.poll.interval.ms and asks the runtime for new task configurations when the set
changes. Each task polls its tables in turn, each through a TableQuerier that resumes from the
offsets the runtime committed.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from ...config import AbstractConfig, ConfigDef, ConfigException, Config
from ...connector import SourceConnector, SourceTask, Task
from ...errors import ConnectException, RetriableException
from ...records import SourceRecord
from . import config as c
from .dialect import create_engine, redacted, translate
from .querier import QUERY_NAME_KEY, QUERY_NAME_VALUE, TABLE_NAME_KEY, TableQuerier

log = logging.getLogger(__name__)


def list_tables(engine: sa.engine.Engine, settings: dict[str, Any]) -> list[str]:
    """The tables to copy, sorted: of the configured types, filtered by white/black list."""
    inspector = sa.inspect(engine)
    schema = settings.get(c.SCHEMA_PATTERN)
    types = {t.upper() for t in settings[c.TABLE_TYPES]}
    names: set[str] = set()
    if "TABLE" in types:
        names.update(inspector.get_table_names(schema=schema))
    if "VIEW" in types:
        names.update(inspector.get_view_names(schema=schema))
    whitelist, blacklist = set(settings[c.TABLE_WHITELIST]), set(settings[c.TABLE_BLACKLIST])
    if whitelist:
        names &= whitelist
    names -= blacklist
    return sorted(n for n in names if not n.startswith("sqlite_"))


def group_partitions(items: list[str], groups: int) -> list[list[str]]:
    """Kafka's ConnectorUtils.groupPartitions: contiguous, as even as possible."""
    if groups <= 0:
        raise ValueError("Number of groups must be positive.")
    out: list[list[str]] = []
    per, extra = divmod(len(items), groups)
    start = 0
    for group in range(groups):
        size = per + (1 if group < extra else 0)
        out.append(items[start:start + size])
        start += size
    return out


def _validate_modes(settings: dict[str, Any]) -> None:
    if settings[c.TABLE_WHITELIST] and settings[c.TABLE_BLACKLIST]:
        raise ConfigException("table.whitelist and table.blacklist are exclusive.")
    mode = settings[c.MODE]
    if not mode:
        raise ConfigException(c.MODE, mode, "String must be one of: bulk, timestamp, incrementing, "
                              "timestamp+incrementing")
    if mode in (c.MODE_TIMESTAMP, c.MODE_TIMESTAMP_INCREMENTING) and not settings[c.TIMESTAMP_COLUMN]:
        raise ConfigException(c.TIMESTAMP_COLUMN, "", f"must be set in mode {mode}")


class JdbcSourceConnector(SourceConnector):
    def __init__(self) -> None:
        super().__init__()
        self.settings: dict[str, Any] = {}
        self.props: dict[str, str] = {}
        self.engine: sa.engine.Engine | None = None
        self.tables: list[str] = []
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None

    def config(self) -> ConfigDef:
        return c.source_config_def()

    def validate(self, props: Any) -> Config:
        result = super().validate(props)
        values = {v.name: v for v in result.config_values}
        if props.get(c.TABLE_WHITELIST) and props.get(c.TABLE_BLACKLIST):
            values[c.TABLE_BLACKLIST].add_error_message("table.whitelist and table.blacklist are exclusive.")
        mode = props.get(c.MODE, "")
        if mode in (c.MODE_TIMESTAMP, c.MODE_TIMESTAMP_INCREMENTING) and not props.get(c.TIMESTAMP_COLUMN):
            values[c.TIMESTAMP_COLUMN].add_error_message(f"Timestamp column name must be set in mode {mode}")
        if not mode:
            values[c.MODE].add_error_message("Missing required configuration \"mode\" which has no default value.")
        return result

    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.settings = AbstractConfig(self.config(), props).values
        _validate_modes(self.settings)
        self.engine = create_engine(self.settings[c.CONNECTION_URL], self.settings[c.CONNECTION_USER],
                                    self.settings[c.CONNECTION_PASSWORD])
        self._stop.clear()
        if not self.settings[c.QUERY]:
            self.tables = self._list_with_retries()
            interval = int(self.settings[c.TABLE_POLL_INTERVAL]) / 1000.0
            if interval > 0:
                self._monitor = threading.Thread(target=self._watch_tables, args=(interval,),
                                                 name="jdbc-table-monitor", daemon=True)
                self._monitor.start()

    def _list_with_retries(self) -> list[str]:
        assert self.engine is not None
        attempts = int(self.settings[c.CONNECTION_ATTEMPTS])
        backoff = int(self.settings[c.CONNECTION_BACKOFF]) / 1000.0
        for attempt in range(1, attempts + 1):
            try:
                return list_tables(self.engine, self.settings)
            except sa.exc.SQLAlchemyError as exc:
                error = translate(exc, f"Could not list tables of {redacted(self.settings[c.CONNECTION_URL])}")
                if attempt == attempts or not isinstance(error, RetriableException):
                    raise ConnectException(str(error)) from exc
                log.info("%s; attempt %d of %d, retrying in %.1fs", error, attempt, attempts, backoff)
                if self._stop.wait(backoff):
                    break
        return []

    def _watch_tables(self, interval: float) -> None:
        """Kafka's TableMonitorThread: a changed table set means new task configurations."""
        while not self._stop.wait(interval):
            assert self.engine is not None
            try:
                tables = list_tables(self.engine, self.settings)
            except sa.exc.SQLAlchemyError as exc:
                log.warning("Could not list tables: %s", translate(exc, "table monitor"))
                continue
            if tables != self.tables:
                log.info("Tables changed from %s to %s: requesting task reconfiguration", self.tables, tables)
                self.tables = tables
                if self.context is not None:
                    self.context.request_task_reconfiguration()

    def task_class(self) -> type[Task]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self.settings.get(c.QUERY):
            return [dict(self.props)]
        if not self.tables:
            log.warning("No tables were found so there's no work to be done.")
            return []
        groups = group_partitions(self.tables, min(max_tasks, len(self.tables)))
        return [{**self.props, c.TABLES: ",".join(group)} for group in groups]

    def stop(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
            self._monitor = None
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None


class JdbcSourceTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self.engine: sa.engine.Engine | None = None
        self.queriers: list[TableQuerier] = []
        self._stop = threading.Event()
        #: held while poll() uses the queriers: stop() (another thread) closes them only when free
        self._polling = threading.Lock()

    def start(self, props: dict[str, str]) -> None:
        definition = ConfigDef(c.source_config_def()).define(c.TABLES, c.Type.LIST, "")
        settings = AbstractConfig(definition, props).values
        _validate_modes(settings)
        zone = ZoneInfo(settings[c.DB_TIMEZONE])
        self.engine = create_engine(settings[c.CONNECTION_URL], settings[c.CONNECTION_USER],
                                    settings[c.CONNECTION_PASSWORD])
        reader = self.context.offset_storage_reader() if self.context is not None else None
        self._stop.clear()
        if settings[c.QUERY]:
            partition = {QUERY_NAME_KEY: QUERY_NAME_VALUE}
            offset = reader.offset(partition) if reader is not None else None
            self.queriers = [TableQuerier(self.engine, settings, zone, query=settings[c.QUERY], offset=offset)]
            return
        tables = settings[c.TABLES]
        if not tables:
            raise ConnectException("Invalid configuration: each JdbcSourceTask must have at least one table assigned "
                                   "to it")
        for table in tables:
            offset = reader.offset({TABLE_NAME_KEY: table}) if reader is not None else None
            self.queriers.append(TableQuerier(self.engine, settings, zone, table=table,
                                              schema_name=settings.get(c.SCHEMA_PATTERN), offset=offset))

    def poll(self) -> list[SourceRecord] | None:
        """The next batch of the querier that is due; waits (at most a second) when none is."""
        with self._polling:
            try:
                return self._poll()
            finally:
                if self._stop.is_set():
                    self._release()

    def _poll(self) -> list[SourceRecord] | None:
        if not self.queriers:
            self._stop.wait(1.0)
            return None
        self.queriers.sort(key=lambda q: (not q.querying, q.next_update))
        head = self.queriers[0]
        wait = head.next_update - time.monotonic()
        if not head.querying and wait > 0:
            self._stop.wait(min(wait, 1.0))
            return None
        if self._stop.is_set():
            return None
        return head.poll() or None

    def stop(self) -> None:
        """Called from another thread: wakes a waiting poll; the queriers' connections are closed
        here if no poll is using them, else by that poll as it returns."""
        self._stop.set()
        if self._polling.acquire(timeout=5):
            try:
                self._release()
            finally:
                self._polling.release()

    def _release(self) -> None:
        for querier in self.queriers:
            querier.close()
        if self.engine is not None:
            self.engine.dispose()


