"""In-memory stand-ins for the contexts the Connect runtime hands tasks (offsets, errant records,
redelivery timeouts), so connectors are tested in-process without a worker."""
from __future__ import annotations

from typing import Any, Mapping

from kafkalite.client.cluster import TopicPartition


class MemoryOffsetReader:
    def __init__(self, offsets: dict[tuple[tuple[str, Any], ...], dict[str, Any]] | None = None) -> None:
        self.store = dict(offsets or {})

    @staticmethod
    def key(partition: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(partition.items()))

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.store.get(self.key(partition))

    def offsets(self, partitions: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        return {self.key(p): self.offset(p) for p in partitions}

    def commit(self, records: list[Any]) -> None:
        """What the runtime does after writing records: remember each partition's last offset."""
        for record in records:
            if record.source_offset is not None:
                self.store[self.key(record.source_partition)] = record.source_offset


class SourceContext:
    def __init__(self, props: dict[str, str], reader: MemoryOffsetReader | None = None) -> None:
        self.props = props
        self.reader = reader or MemoryOffsetReader()

    def configs(self) -> dict[str, str]:
        return self.props

    def offset_storage_reader(self) -> MemoryOffsetReader:
        return self.reader


class CompletedFuture:
    def result(self, timeout: float | None = None) -> None:
        return None


class ListReporter:
    def __init__(self) -> None:
        self.reported: list[tuple[Any, BaseException]] = []

    def report(self, record: Any, error: BaseException) -> CompletedFuture:
        self.reported.append((record, error))
        return CompletedFuture()


class SinkContext:
    def __init__(self, props: dict[str, str] | None = None, reporter: ListReporter | None = None) -> None:
        self.props = props or {}
        self.reporter = reporter
        self.timeouts: list[int] = []
        self.offsets: dict[TopicPartition, int] = {}
        self.assigned: set[TopicPartition] = set()
        self.commit_requested = False

    def configs(self) -> dict[str, str]:
        return self.props

    def offset(self, offsets: Any, offset: int | None = None) -> None:
        if isinstance(offsets, TopicPartition):
            assert offset is not None
            self.offsets[offsets] = offset
        else:
            self.offsets.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self.timeouts.append(timeout_ms)

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        self.commit_requested = True

    def errant_record_reporter(self) -> ListReporter | None:
        return self.reporter
