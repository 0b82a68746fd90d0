"""Topics: a paged, searchable list; one topic's partitions and configs; create, delete, add
partitions, edit configs.

The list costs one Metadata request (all topics: names, partitions, replicas and ISRs come in it)
plus one DescribeLogDirs per broker narrowed to the page's topics, whatever the partition count:
never a request per partition. A topic page adds one ListOffsets per leader for the log
start and end offsets of every partition at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafkalite.client.admin import DELETE, SET, TOPIC, ConfigEntry, NewTopic
from kafkalite.client.cluster import ClusterMetadata, TopicMetadata, TopicPartition
from kafkalite.client.errors import ClientError
from kafkalite.config import TOPIC_KEYS

from ..context import ConsoleContext

EARLIEST, LATEST = -2, -1
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    size_bytes: int | None          # None when the brokers could not say (DescribeLogDirs failed)


@dataclass(frozen=True)
class TopicPage:
    rows: list[TopicRow]
    total: int                      # topics matching the search
    page: int
    page_size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    log_start: int | None
    log_end: int | None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def messages(self) -> int | None:
        return None if self.log_start is None or self.log_end is None else self.log_end - self.log_start


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    sensitive: bool
    documentation: str
    kind: str


@dataclass(frozen=True)
class TopicDetail:
    name: str
    internal: bool
    partitions: list[PartitionRow]
    configs: list[ConfigRow]
    size_bytes: int | None


def _counts(topic: TopicMetadata) -> tuple[int, int, int]:
    """(replication factor, under-replicated, offline) of a topic's partitions."""
    parts = topic.partitions.values()
    rf = max((len(p.replicas) for p in parts), default=0)
    under = sum(1 for p in parts if p.leader >= 0 and len(p.isr) < len(p.replicas))
    return rf, under, sum(1 for p in parts if p.leader < 0)


def sizes_by_topic(log_dirs: dict[int, list], topics: set[str]) -> dict[str, int]:
    """Bytes on disk per topic, summed over every replica on every broker (what the disks hold)."""
    out: dict[str, int] = {}
    for dirs in log_dirs.values():
        for d in dirs:
            for r in d.replicas:
                if r.partition.topic in topics and not r.is_future:
                    out[r.partition.topic] = out.get(r.partition.topic, 0) + r.size
    return out


def config_rows(entries: dict[str, ConfigEntry]) -> list[ConfigRow]:
    """DescribeConfigs' answer with kafkalite's own documentation of each topic config."""
    rows = []
    for name, e in sorted(entries.items()):
        key = TOPIC_KEYS.get(name)
        rows.append(ConfigRow(name, e.value, e.source, e.source != "DYNAMIC_TOPIC_CONFIG", e.read_only, e.sensitive,
                              key.documentation if key else "", key.kind if key else ""))
    return rows


class TopicsService:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def page(self, search: str = "", page: int = 1, page_size: int = 50, include_internal: bool = True) -> TopicPage:
        page_size = max(1, min(page_size, MAX_PAGE_SIZE))
        needle = search.strip().lower()

        def work(admin: object) -> TopicPage:
            md: ClusterMetadata = self.context.client.metadata(None)
            names = sorted(n for n, t in md.topics.items()
                           if (include_internal or not t.internal) and needle in n.lower())
            first = (max(page, 1) - 1) * page_size
            shown = names[first:first + page_size]
            sizes: dict[str, int] | None
            try:
                sizes = sizes_by_topic(self.context.admin.describe_log_dirs(None, shown, metadata=md), set(shown)) \
                    if shown else {}
            except ClientError:
                sizes = None
            rows = []
            for n in shown:
                t = md.topics[n]
                rf, under, offline = _counts(t)
                rows.append(TopicRow(n, t.internal, len(t.partitions), rf, under, offline,
                                     None if sizes is None else sizes.get(n, 0)))
            return TopicPage(rows, len(names), max(page, 1), page_size)

        return self.context.call(work)

    def detail(self, name: str) -> TopicDetail:
        def work(admin: object) -> TopicDetail:
            client = self.context.client
            md = client.metadata([name])
            topic = md.topics.get(name)
            if topic is None or topic.error:
                raise ClientError(f"topic {name!r} does not exist", int(topic.error) if topic else 3)
            tps = [TopicPartition(name, p) for p in topic.partitions]
            starts = ends = {}
            if tps:
                try:
                    starts = client.list_offsets({tp: EARLIEST for tp in tps})
                    ends = client.list_offsets({tp: LATEST for tp in tps})
                except ClientError:
                    starts = ends = {}     # an offline partition: show the rest of the page
            rows = [PartitionRow(p.partition, p.leader, p.replicas, p.isr, p.offline,
                                 starts.get(TopicPartition(name, p.partition), (None, 0))[0],
                                 ends.get(TopicPartition(name, p.partition), (None, 0))[0])
                    for p in sorted(topic.partitions.values(), key=lambda p: p.partition)]
            configs = config_rows(self.context.admin.describe_configs(TOPIC, name))
            try:
                size: int | None = sizes_by_topic(self.context.admin.describe_log_dirs(None, [name], metadata=md),
                                                  {name}).get(name, 0)
            except ClientError:
                size = None
            return TopicDetail(name, topic.internal, rows, configs, size)

        return self.context.call(work)

    def create(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        result = self.context.call(lambda admin: admin.create_topics(
            [NewTopic(name, partitions, replication_factor, configs=configs)]))
        _raise_first(result)

    def delete(self, name: str) -> None:
        _raise_first(self.context.call(lambda admin: admin.delete_topics([name])))

    def add_partitions(self, name: str, total: int) -> None:
        _raise_first(self.context.call(lambda admin: admin.create_partitions({name: total})))

    def set_config(self, name: str, key: str, value: str | None) -> None:
        """Override ``key`` (or, with None, remove the override so the default applies again)."""
        op = (key, DELETE, None) if value is None else (key, SET, value)
        self.context.call(lambda admin: admin.incremental_alter_configs(TOPIC, name, [op]))


def _raise_first(results: dict[str, ClientError | None]) -> None:
    for err in results.values():
        if err is not None:
            raise err
