"""The command topic, ``_confluent-ksql-<ksql.service.id>_command_topic`` (ksqlDB's
``CommandStore``): one partition, every DDL and persistent-query statement as a record keyed
by its command id (``stream/`NAME`/create``), the value ksqlDB's ``Command`` JSON
(``statement``, ``streamsProperties``, ``originalProperties``). A server replays it from the
start on startup, so a restarted server, or a second one with the same service id, rebuilds the
same metastore and restarts the same queries. Written with acks=all by an idempotent producer,
read up to the end offset with kafkalite's consumer.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client import TopicPartition
from kafkalite.client.admin import Admin, NewTopic
from kafkalite.client.consumer import Consumer
from kafkalite.client.errors import ClientError
from kafkalite.client.producer import Producer
from kafkalite.client.security import ClientSecurity
from kafkalite.errors import ErrorCode

log = logging.getLogger(__name__)


def command_topic_name(service_id: str) -> str:
    return f"_confluent-ksql-{service_id}_command_topic"


@dataclass(frozen=True)
class Command:
    command_id: str                    # e.g. stream/`PAGEVIEWS`/create
    statement: str
    streams_properties: dict[str, Any] = field(default_factory=dict)
    offset: int = -1                   # its command sequence number (the record's offset)

    def value(self) -> bytes:
        return json.dumps({"statement": self.statement, "streamsProperties": self.streams_properties,
                           "originalProperties": {}, "version": 1}).encode()


class CommandTopic:
    def __init__(self, bootstrap: str, service_id: str, *, security: ClientSecurity | None = None,
                 replication: int = -1) -> None:
        self.bootstrap = bootstrap
        self.topic = command_topic_name(service_id)
        self.security = security
        self.replication = replication
        self._producer: Producer | None = None

    def ensure(self) -> None:
        """Create the topic (one partition, retention forever) unless it exists."""
        with Admin(self.bootstrap, security=self.security) as admin:
            err = admin.create_topics([NewTopic(self.topic, 1, self.replication,
                                                configs={"retention.ms": "-1", "cleanup.policy": "delete"})]
                                      )[self.topic]
        if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise err

    def append(self, command_id: str, statement: str, properties: dict[str, Any]) -> int:
        """Write one command; returns its offset (the command sequence number)."""
        if self._producer is None:
            self._producer = Producer(self.bootstrap, enable_idempotence=True, security=self.security,
                                      client_id="ksql-command-producer")
        cmd = Command(command_id, statement, properties)
        meta = self._producer.send(self.topic, cmd.value(), command_id.encode(), partition=0).result(60)
        return meta.offset

    def read_all(self) -> list[Command]:
        """Every command from the beginning to the current end, in order."""
        tp = TopicPartition(self.topic, 0)
        consumer = Consumer(self.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                            security=self.security, client_id="ksql-command-reader")
        out: list[Command] = []
        try:
            consumer.assign([tp])
            end = consumer.end_offsets([tp])[tp]
            consumer.seek_to_beginning([tp])
            while consumer.position(tp) < end:
                for rec in consumer.poll(1000):
                    if rec.value is None:
                        continue
                    try:
                        doc = json.loads(rec.value)
                        out.append(Command((rec.key or b"").decode(), doc["statement"],
                                           dict(doc.get("streamsProperties") or {}), rec.offset))
                    except (ValueError, KeyError) as exc:
                        log.error("command topic %s offset %d: unreadable command skipped: %s",
                                  self.topic, rec.offset, exc)
        except ClientError:
            raise
        finally:
            consumer.close(autocommit=False)
        return out

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(10)
            self._producer = None
