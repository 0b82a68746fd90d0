"""Windowed rates, quota entities with Kafka's precedence, and per-entity throttle times."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
#: the default entity's name in ZooKeeper paths and in DescribeClientQuotas (null name there)
DEFAULT = "<default>"


@dataclass(frozen=True)
class RateConfig:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka: 11 and 1)."""

    samples: int = 11
    window_ms: int = 1000


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat``: the total of the live samples divided by the
    elapsed window (at least ``samples - 1`` full windows)."""

    def __init__(self, config: RateConfig) -> None:
        self.config = config
        self._samples: deque[list[int | float]] = deque()       # [window start ms, value]

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples or now_ms >= int(self._samples[-1][0]) + self.config.window_ms:
            self._samples.append([now_ms, 0.0])
            while len(self._samples) > self.config.samples:
                self._samples.popleft()
        self._samples[-1][1] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.config.samples * self.config.window_ms
        while self._samples and now_ms - int(self._samples[0][0]) >= expire:
            self._samples.popleft()

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = int(self._samples[0][0]) if self._samples else now_ms
        elapsed = now_ms - oldest
        full, least = elapsed // self.config.window_ms, self.config.samples - 1
        if full < least:
            elapsed += (least - full) * self.config.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Units per second over the window."""
        size = self.window_size_ms(now_ms)
        return sum(float(s[1]) for s in self._samples) / (size / 1000.0) if size > 0 else 0.0


@dataclass(frozen=True)
class QuotaEntity:
    """A quota's owner: ``user`` / ``client_id`` are a name, :data:`DEFAULT`, or None when the
    entity has no such part (``/config/clients/c`` has user None)."""

    user: str | None
    client_id: str | None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client id or both")


#: answers :meth:`QuotaEntities.resolve` remembers between quota changes (then it starts over)
RESOLVED_MAX = 10_000


class QuotaEntities:
    """The quota overrides known to a broker, entity -> {quota key: value}. Change them only
    with :meth:`set`: it also forgets the remembered answers of :meth:`resolve`."""

    def __init__(self) -> None:
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self._resolved: dict[tuple[str, str, str], tuple[QuotaEntity, float] | None] = {}

    def set(self, entity: QuotaEntity, config: Mapping[str, float]) -> None:
        """Replace an entity's quotas (an empty mapping removes the entity)."""
        quotas = {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}
        if quotas:
            self.configs[entity] = quotas
        else:
            self.configs.pop(entity, None)
        self._resolved.clear()

    def resolve(self, key: str, user: str, client_id: str) -> tuple[QuotaEntity, float] | None:
        """The quota ``key`` for this user and client id with Kafka's precedence (2.x
        ``DefaultQuotaCallback``), and the entity it came from; None when unlimited.

        Asked twice per Produce (its bytes and its request time): with no quota configured
        anywhere the answer is None at once, and otherwise it is remembered per (key, user,
        client id) until the next :meth:`set`, because walking the precedence builds eight
        entities (py-spy under produce load: ~4 % of the broker's Python time, for nothing)."""
        if not self.configs:
            return None
        memo = (key, user, client_id)
        try:
            return self._resolved[memo]
        except KeyError:
            pass
        found = self._walk(key, user, client_id)
        if len(self._resolved) >= RESOLVED_MAX:
            self._resolved.clear()
        self._resolved[memo] = found
        return found

    def _walk(self, key: str, user: str, client_id: str) -> tuple[QuotaEntity, float] | None:
        order = (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(user, None),
                 QuotaEntity(DEFAULT, client_id), QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT, None),
                 QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT))
        for entity in order:
            quotas = self.configs.get(entity)
            if quotas is not None and key in quotas:
                return entity, quotas[key]
        return None


class ClientQuotaManager:
    """One quota type (produce bytes, fetch bytes or request time) on one broker."""

    def __init__(self, key: str, entities: QuotaEntities, config: RateConfig) -> None:
        self.key = key
        self.entities = entities
        self.config = config
        #: (user tag, client-id tag) -> rate: Kafka's quota sensor per metric tags
        self.rates: dict[tuple[str, str], Rate] = {}

    def quota(self, user: str, client_id: str) -> float | None:
        found = self.entities.resolve(self.key, user, client_id)
        return None if found is None else found[1]

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (Kafka's ``unrecordQuotaSensor``: a throttled fetch whose
        records were not sent)."""
        found = self.entities.resolve(self.key, user, client_id)
        if found is None:
            return
        rate = self.rates.get(self._tags(found[0], user, client_id))
        if rate is not None:
            rate.record(-value, now_ms)

    @staticmethod
    def _tags(entity: QuotaEntity, user: str, client_id: str) -> tuple[str, str]:
        # the matched entity's parts name the sensor: a named entity is shared by its clients,
        # a <default> part stands for each actual user / client id
        return (user if entity.user is not None else "", client_id if entity.client_id is not None else "")

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for this client; the throttle time in ms (0 within its quota)."""
        found = self.entities.resolve(self.key, user, client_id)
        if found is None:
            return 0
        entity, bound = found
        tags = self._tags(entity, user, client_id)
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.config)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if bound <= 0:
            return rate.window_size_ms(now_ms) if value > 0 else 0
        if measured <= bound:
            return 0
        return round((measured - bound) / bound * rate.window_size_ms(now_ms))
