"""``PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]`` (ksqlDB's ``TopicStreamWriter`` and
``RecordFormatter``): a topic's raw records as text lines, whatever their format.

Each key and value is tried against ksqlDB's candidate formats in its order (AVRO and JSON_SR need
the registry's magic byte; JSON, KAFKA_INT, KAFKA_BIGINT, KAFKA_DOUBLE, KAFKA_STRING); a format
that fails once is dropped for the rest of the stream, the first that still works gives the text,
and ``Key format: ...``/``Value format: ...`` lines are printed whenever the set of possible
formats changes. Keys are also tried as Kafka Streams' windowed keys (``[key@start/end]``), and bytes
that no format reads are shown escaped. A record is ``rowtime: <UTC time>, key: <k>, value: <v>, partition: <p>``.
"""
from __future__ import annotations

import datetime
import json
import logging
import struct
import threading
from typing import Any, Callable

from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.client.consumer import Consumer, ConsumerRecord
from kafkalite.client.security import ClientSecurity
from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.queries import TransientQuery

log = logging.getLogger(__name__)

NO_DATA = "¯\\_(ツ)_/¯ - no data processed"
#: an Avro value (registry-framed) as text, or None if it is not one
AvroText = Callable[[bytes], "str | None"]


def _json(data: bytes) -> str:
    text = data.decode("utf-8")
    json.loads(text)
    return text


def _string(data: bytes) -> str:
    text = data.decode("utf-8")
    if not text:
        raise ValueError("Empty data")
    return text


def _int(data: bytes) -> str:
    if len(data) != 4:
        raise ValueError("Size of data received by IntegerDeserializer is not 4")
    return str(struct.unpack(">i", data)[0])


def _bigint(data: bytes) -> str:
    if len(data) != 8:
        raise ValueError("Size of data received by LongDeserializer is not 8")
    return str(struct.unpack(">q", data)[0])


def _double(data: bytes) -> str:
    if len(data) != 8:
        raise ValueError("Size of data received by DoubleDeserializer is not 8")
    return str(struct.unpack(">d", data)[0])


def _bytes(data: bytes) -> str:
    """Kafka's ``Bytes.toString``: printable ASCII as it is, any other byte (and the backslash) as
    ``\\xNN`` (ksqlDB's last resort, UNRECOGNISED_BYTES)."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in data)


Deserialize = Callable[[bytes], str]


def _time_windowed(inner: Deserialize) -> Deserialize:
    """Kafka Streams' TimeWindowedDeserializer: the key, then the window's start (8 bytes); the end
    is not in the bytes, so ksqlDB shows ``-``."""
    def deserialize(data: bytes) -> str:
        start = struct.unpack(">q", data[-8:])[0] if len(data) >= 8 else -1
        if start < 0 or start == 2 ** 63 - 1:        # no window: negative, or one that cannot end
            raise ValueError("not a time window")
        return f"[{inner(data[:-8])}@{start}/-]"
    return deserialize


def _session_windowed(inner: Deserialize) -> Deserialize:
    """Kafka Streams' SessionWindowedDeserializer: the key, then the session's end and start."""
    def deserialize(data: bytes) -> str:
        end, start = struct.unpack(">qq", data[-16:]) if len(data) >= 16 else (-1, -1)
        if start < 0 or end < start:
            raise ValueError("not a session window")
        return f"[{inner(data[:-16])}@{start}/{end}]"
    return deserialize


class Deserializers:
    """The candidate formats still possible for one side (key or value) of a topic's records, in
    ksqlDB's order; a key may also be windowed, so each key format also comes as SESSION(f),
    HOPPING(f) and TUMBLING(f), tried first. Bytes no format reads are shown escaped (ksqlDB's
    UNRECOGNISED_BYTES, never named among the possible formats)."""

    def __init__(self, avro: AvroText | None, windowed: bool = False) -> None:
        def avro_text(data: bytes) -> str:
            if avro is None or not data or data[0] != 0:
                raise ValueError("not registry-framed")
            text = avro(data)
            if text is None:
                raise ValueError("not Avro")
            return text
        formats: list[tuple[str, Deserialize]] = [
            ("AVRO", avro_text), ("JSON", _json), ("KAFKA_INT", _int), ("KAFKA_BIGINT", _bigint),
            ("KAFKA_DOUBLE", _double), ("KAFKA_STRING", _string)]
        self.candidates: list[tuple[str, Deserialize]] = []
        for name, deserialize in formats:
            if windowed:
                self.candidates += [(f"SESSION({name})", _session_windowed(deserialize)),
                                    (f"HOPPING({name})", _time_windowed(deserialize)),
                                    (f"TUMBLING({name})", _time_windowed(deserialize))]
            self.candidates.append((name, deserialize))
        self.seen_data = False

    def format(self, data: bytes | None) -> str:
        if data is None:
            return "<null>"
        self.seen_data = True
        first: str | None = None
        still: list[tuple[str, Deserialize]] = []
        for name, deserialize in self.candidates:
            try:
                text = deserialize(data)
            except Exception:
                continue
            still.append((name, deserialize))
            first = text if first is None else first
        self.candidates = still
        return first if first is not None else _bytes(data)

    @property
    def possible(self) -> list[str]:
        return [n for n, _ in self.candidates] if self.seen_data else [NO_DATA]


class RecordFormatter:
    """Records to PRINT's lines, with the format lines each time the possible formats change."""

    def __init__(self, avro: AvroText | None = None) -> None:
        self.keys, self.values = Deserializers(avro, windowed=True), Deserializers(avro)
        self._shown: tuple[list[str], list[str]] = (["-"], ["-"])     # forces the first format lines

    def format(self, records: list[ConsumerRecord]) -> list[str]:
        """The batch's lines. If a batch rules out the format its first lines were shown in (the
        first batch always does: no format was active), the whole batch is shown again in the
        formats still possible, as ksqlDB does, so that e.g. a string key of 8 bytes is not shown as
        a BIGINT because it came first."""
        active_key, active_value = (self.keys.possible or [""])[0], (self.values.possible or [""])[0]
        lines = self._lines(records)
        if active_key in self.keys.possible and active_value in self.values.possible:
            return lines
        return self._lines(records)

    def _lines(self, records: list[ConsumerRecord]) -> list[str]:
        return [f"rowtime: {_rowtime(r.timestamp)}, key: {self.keys.format(r.key)}, "
                f"value: {self.values.format(r.value)}, partition: {r.partition}" for r in records]

    def format_lines(self) -> list[str]:
        out: list[str] = []
        for index, (prefix, current) in enumerate((("Key format: ", self.keys.possible),
                                                   ("Value format: ", self.values.possible))):
            if current != self._shown[index]:
                out.append(prefix + (" or ".join(current) if current else
                                     " does not match any supported format. It may be a STRING with encoding "
                                     "other than UTF8, or some other format."))
        self._shown = (self.keys.possible, self.values.possible)
        return out


def _rowtime(ts: int) -> str:
    if ts < 0:
        return "N/A"
    t = datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y/%m/%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} Z"


def resolve_topic(stmt: ast.Print, topics: list[str], text: str) -> str:
    """ksqlDB's rule: a quoted name is exact; an unquoted one matches case-insensitively."""
    if stmt.topic in topics:
        return stmt.topic
    if not stmt.quoted:
        matches = [t for t in topics if t.lower() == stmt.topic.lower()]
        if len(matches) == 1:
            return matches[0]
    raise KsqlError(f"Could not find topic '{stmt.topic}', or the KSQL user does not have permissions to list the "
                    "topic. Topic names are case-sensitive.", statement=text)


class TopicPrinter:
    """A PRINT running in its own thread: polls the topic and offers lines to the transient query
    until LIMIT records were printed or the query is closed."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None, topic: str, stmt: ast.Print,
                 tq: TransientQuery, avro: AvroText | None) -> None:
        self.topic = topic
        self.stmt = stmt
        self.tq = tq
        self.formatter = RecordFormatter(avro)
        self.consumer = Consumer(bootstrap, enable_auto_commit=False, security=security,
                                 client_id=f"ksql-print-{topic}")
        with KafkaClient(bootstrap, security=security) as client:
            tps = [TopicPartition(topic, p) for p in client.partitions_for(topic)]
        self.consumer.assign(tps)
        if stmt.from_beginning:
            self.consumer.seek_to_beginning(tps)
        else:
            self.consumer.seek_to_end(tps)
            for tp in tps:
                self.consumer.position(tp)                # fix "latest" now, before the client is answered
        self._stopped = threading.Event()
        tq._stop = self._stopped.set
        self.thread = threading.Thread(target=self._run, name=f"print-{topic}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        polled = written = 0
        try:
            while not self._stopped.is_set():
                records = self.consumer.poll(500)
                if not records:
                    continue
                lines = self.formatter.format(records)
                out: list[Any] = []
                for line in lines:
                    if polled % self.stmt.interval == 0:
                        out.append(line)
                        written += 1
                    polled += 1
                    if self.stmt.limit is not None and written >= self.stmt.limit:
                        break
                self.tq.offer(self.formatter.format_lines() + out)
                if self.stmt.limit is not None and written >= self.stmt.limit:
                    break
        except Exception as exc:                          # the client sees the end of the stream
            log.error("PRINT %s failed: %s", self.topic, exc)
        finally:
            self.consumer.close(autocommit=False)
            self.tq.close()
