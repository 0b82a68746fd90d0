"""``FileStreamSource`` / ``FileStreamSink``, as Kafka ships them (``connect/file``): the
connectors of Kafka's Connect quickstart.

* Source: ``file`` (default: standard input), ``topic`` (one topic), ``batch.size`` (2000 lines
  per poll). One task; each line is a string record (no key) whose source offset is the byte
  position after it, stored as ``{"filename": <file>} -> {"position": <n>}``, so a restarted task
  resumes after the last committed line. A line is only emitted once its newline is read.
* Sink: ``file`` (default: standard output), ``topics``; each record's value is written on a line
  and the file is flushed at each offset commit.
"""
from __future__ import annotations

import io
import logging
import sys
import threading
import time
from typing import IO, Any, Mapping

from kafkalite.connect.config import NO_DEFAULT_VALUE, ConfigDef, Importance, Type
from kafkalite.connect.connector import SinkConnector, SinkTask, SourceConnector, SourceTask, Task, TopicPartition
from kafkalite.connect.data import STRING_SCHEMA
from kafkalite.connect.errors import ConfigException, ConnectException
from kafkalite.connect.records import SinkRecord, SourceRecord

log = logging.getLogger(__name__)

FILE_CONFIG, TOPIC_CONFIG, TOPICS_CONFIG, TASK_BATCH_SIZE_CONFIG = "file", "topic", "topics", "batch.size"
DEFAULT_TASK_BATCH_SIZE = 2000
FILENAME_FIELD, POSITION_FIELD = "filename", "position"


def _version() -> str:
    from kafkalite.connect import __version__
    return str(__version__)


class FileStreamSourceConnector(SourceConnector):
    CONFIG_DEF = (ConfigDef()
                  .define(FILE_CONFIG, Type.STRING, None, None, Importance.HIGH,
                          "Source filename. If not specified, the standard input will be used")
                  .define(TOPIC_CONFIG, Type.LIST, NO_DEFAULT_VALUE, None, Importance.HIGH,
                          "The topic to publish data to")
                  .define(TASK_BATCH_SIZE_CONFIG, Type.INT, DEFAULT_TASK_BATCH_SIZE, None, Importance.LOW,
                          "The maximum number of records the Source task can read from file one time"))

    def __init__(self) -> None:
        super().__init__()
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return _version()

    def start(self, props: dict[str, str]) -> None:
        parsed = self.CONFIG_DEF.parse(props)
        topics = parsed[TOPIC_CONFIG] or []
        if len(topics) != 1:
            raise ConfigException("'topic' in FileStreamSourceConnector configuration requires definition of a "
                                  "single topic")
        self.props = {FILE_CONFIG: parsed[FILE_CONFIG] or "", TOPIC_CONFIG: topics[0],
                      TASK_BATCH_SIZE_CONFIG: str(parsed[TASK_BATCH_SIZE_CONFIG])}
        if not parsed[FILE_CONFIG]:
            self.props.pop(FILE_CONFIG)

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]          # only one input stream makes sense

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF


class FileStreamSourceTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self.filename: str | None = None
        self.stream: IO[bytes] | None = None
        self.buffer = b""
        self.position = 0
        self.topic = ""
        self.batch_size = DEFAULT_TASK_BATCH_SIZE
        self._stopping = threading.Event()

    def version(self) -> str:
        return _version()

    def start(self, props: dict[str, str]) -> None:
        self.filename = props.get(FILE_CONFIG) or None
        if self.filename is None:
            self.stream = sys.stdin.buffer
        self.topic = props[TOPIC_CONFIG]
        self.batch_size = int(props.get(TASK_BATCH_SIZE_CONFIG, DEFAULT_TASK_BATCH_SIZE))

    def _open(self) -> bool:
        """Open the file and seek to the committed position; False while it does not exist."""
        assert self.filename is not None
        try:
            stream = open(self.filename, "rb")
        except FileNotFoundError:
            log.warning("Couldn't find file %s for FileStreamSourceTask, sleeping to wait for it to be created",
                        self.filename)
            return False
        offset = None
        if self.context is not None:
            offset = self.context.offset_storage_reader().offset({FILENAME_FIELD: self.filename})
        if offset is not None:
            last = offset.get(POSITION_FIELD)
            if last is not None and not isinstance(last, int):
                stream.close()
                raise ConnectException("Offset position is the incorrect type")
            if last is not None:
                log.debug("found previous offset, trying to skip to file offset %d", last)
                stream.seek(last)
                self.position = last
        self.stream = stream
        self.buffer = b""
        return True

    def poll(self) -> list[SourceRecord] | None:
        if self.stream is None:
            if not self._open():
                self._stopping.wait(1.0)
                return None
        assert self.stream is not None
        chunk = self.stream.read1(65536) if isinstance(self.stream, io.BufferedReader) else self.stream.read(65536)
        if chunk:
            self.buffer += chunk
        records: list[SourceRecord] = []
        buffer, start = self.buffer, 0      # lines are cut at an index, the rest sliced off once:
        while len(records) < self.batch_size:           # no copy of the whole buffer per line
            nl = buffer.find(b"\n", start)
            if nl < 0:
                break
            end = nl - 1 if nl > start and buffer[nl - 1] == 13 else nl          # "\r\n"
            line = buffer[start:end]
            self.position += nl + 1 - start
            start = nl + 1
            records.append(SourceRecord(self._partition(), self._offset(), self.topic, None, None, None,
                                        STRING_SCHEMA, line.decode("utf-8", "replace"),
                                        int(time.time() * 1000)))
        if start:
            self.buffer = buffer[start:]
        if not records and not chunk:
            self._stopping.wait(1.0)       # Kafka's task waits a second for more data
            return None
        return records

    def _partition(self) -> dict[str, Any] | None:
        return {FILENAME_FIELD: self.filename} if self.filename is not None else None

    def _offset(self) -> dict[str, Any] | None:
        return {POSITION_FIELD: self.position} if self.filename is not None else None

    def stop(self) -> None:
        self._stopping.set()
        if self.stream is not None and self.filename is not None:
            try:
                self.stream.close()
            except OSError:
                pass


class FileStreamSinkConnector(SinkConnector):
    CONFIG_DEF = ConfigDef().define(FILE_CONFIG, Type.STRING, None, None, Importance.HIGH,
                                    "Destination filename. If not specified, the standard output will be used")

    def __init__(self) -> None:
        super().__init__()
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return _version()

    def start(self, props: dict[str, str]) -> None:
        parsed = self.CONFIG_DEF.parse(props)
        self.props = {FILE_CONFIG: parsed[FILE_CONFIG]} if parsed[FILE_CONFIG] else {}

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF


class FileStreamSinkTask(SinkTask):
    def __init__(self) -> None:
        super().__init__()
        self.filename: str | None = None
        self.out: IO[str] | None = None

    def version(self) -> str:
        return _version()

    def start(self, props: dict[str, str]) -> None:
        self.filename = props.get(FILE_CONFIG) or None
        if self.filename is None:
            self.out = sys.stdout
        else:
            try:
                self.out = open(self.filename, "a", encoding="utf-8")
            except OSError as exc:
                raise ConnectException(f"Couldn't find or create file '{self.filename}' for "
                                       f"FileStreamSinkTask: {exc}") from exc

    def put(self, records: list[SinkRecord]) -> None:
        assert self.out is not None
        if records:                 # one write per batch, not per record
            self.out.write("".join([f"{_text(record.value)}\n" for record in records]))

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        if self.out is not None:
            self.out.flush()

    def stop(self) -> None:
        if self.out is not None and self.filename is not None:
            self.out.close()
            self.out = None


def _text(value: Any) -> str:
    """The value as Java's ``toString`` would print it for the common cases."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)
