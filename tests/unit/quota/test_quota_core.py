"""kafkalite.quota: Kafka's windowed rate, the quota precedence of Kafka 2.x and throttle times, driven
with integer clocks."""
from __future__ import annotations

import pytest

from kafkalite.quota import (DEFAULT, PRODUCER_BYTE_RATE, ClientQuotaManager, QuotaEntities, QuotaEntity, Rate,
                             RateConfig)


def test_rate_measures_a_steady_stream_and_forgets_old_samples() -> None:
    """1000 units per second recorded every 100 ms measure 1000/s once the window is full; a
    short burst at the start is measured over samples-1 windows (not over its few ms); samples
    older than samples*window no longer count."""
    rate = Rate(RateConfig(samples=11, window_ms=1000))
    rate.record(500, 0)
    assert rate.measure(1) == pytest.approx(500 / 10.001, rel=1e-3)      # at least 10 full windows
    rate = Rate(RateConfig(samples=11, window_ms=1000))
    for t in range(0, 30_000, 100):
        rate.record(100, t)
    assert rate.measure(30_000) == pytest.approx(1000, rel=0.05)
    assert rate.measure(30_000 + 11_000) == 0


def test_precedence_is_kafkas() -> None:
    """/config/users/u/clients/c wins over users/u/clients/<default>, over users/u, over the
    <default> user's entries, over clients/c, over clients/<default>."""
    e = QuotaEntities()
    chain = [QuotaEntity(None, DEFAULT), QuotaEntity(None, "c"), QuotaEntity(DEFAULT, None),
             QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT, "c"), QuotaEntity("u", None),
             QuotaEntity("u", DEFAULT), QuotaEntity("u", "c")]
    for i, entity in enumerate(chain):
        e.set(entity, {PRODUCER_BYTE_RATE: 100 + i})
        assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") == (entity, 100 + i)
    assert e.resolve(PRODUCER_BYTE_RATE, "v", "d") == (QuotaEntity(DEFAULT, DEFAULT), 103)
    e.set(QuotaEntity(DEFAULT, DEFAULT), {})
    assert e.resolve(PRODUCER_BYTE_RATE, "v", "d") == (QuotaEntity(DEFAULT, None), 102)
    e.set(QuotaEntity(DEFAULT, None), {})
    assert e.resolve(PRODUCER_BYTE_RATE, "v", "d") == (QuotaEntity(None, DEFAULT), 100)
    assert e.resolve("consumer_byte_rate", "u", "c") is None


def simulate(manager: ClientQuotaManager, client: str, batch: int, seconds: int, gap_ms: int = 1) -> float:
    """A client that sends ``batch`` bytes, then waits the throttle time it is told (and
    ``gap_ms``), for ``seconds``; its achieved bytes per second over the last half."""
    now, sent_late = 0, 0
    while now < seconds * 1000:
        throttle = manager.record("ANONYMOUS", client, batch, now)
        if now >= seconds * 500:
            sent_late += batch
        now += throttle + gap_ms
    return sent_late / (seconds / 2)


def test_a_client_that_honours_its_throttle_times_gets_its_quota() -> None:
    """With clients/<default> at 50 kB/s, a client sending 10 kB as fast as it may achieves the
    quota within 10 %; a second client has its own quota (a default is per client) and a client
    with a named override of its own gets that instead."""
    entities = QuotaEntities()
    entities.set(QuotaEntity(None, DEFAULT), {PRODUCER_BYTE_RATE: 50_000})
    entities.set(QuotaEntity(None, "big"), {PRODUCER_BYTE_RATE: 200_000})
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, entities, RateConfig())
    assert simulate(m, "greedy", 10_000, 60) == pytest.approx(50_000, rel=0.1)
    assert m.record("ANONYMOUS", "other", 10_000, 60_000) == 0          # untouched by greedy's rate
    assert simulate(m, "big", 10_000, 60) == pytest.approx(200_000, rel=0.1)


def test_throttle_time_is_kafkas_formula() -> None:
    """After 20 kB in a fresh window against 1 kB/s: rate = 20000 B / 10 s = 2000 B/s, throttle =
    (2000 - 1000) / 1000 * 10 s = 10 s."""
    entities = QuotaEntities()
    entities.set(QuotaEntity(None, "c"), {PRODUCER_BYTE_RATE: 1000})
    m = ClientQuotaManager(PRODUCER_BYTE_RATE, entities, RateConfig())
    assert m.record("ANONYMOUS", "c", 20_000, 5_000) == 10_000
    assert m.record("ANONYMOUS", "unlimited-other", 10**9, 5_000) == 0


def test_resolving_builds_no_entities_without_quotas_and_remembers_answers_until_a_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Produce asks twice (bytes, request time): with no quota anywhere, and for a client
    asked about before, no precedence walk (its eight entities) happens; a change is seen at once."""
    built: list[QuotaEntity] = []
    original = QuotaEntity.__post_init__

    def counting(self: QuotaEntity) -> None:
        built.append(self)
        original(self)

    e = QuotaEntities()
    monkeypatch.setattr(QuotaEntity, "__post_init__", counting)
    assert [e.resolve(PRODUCER_BYTE_RATE, "u", "c") for _ in range(3)] == [None] * 3
    assert built == []
    default = QuotaEntity(DEFAULT, DEFAULT)
    e.set(default, {PRODUCER_BYTE_RATE: 10})
    built.clear()
    assert [e.resolve(PRODUCER_BYTE_RATE, "u", "c") for _ in range(3)] == [(default, 10.0)] * 3
    assert len(built) == 8                      # one walk, then remembered
    e.set(default, {PRODUCER_BYTE_RATE: 20})
    assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") == (default, 20.0)
    e.set(QuotaEntity("u", None), {PRODUCER_BYTE_RATE: 5})
    assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") == (QuotaEntity("u", None), 5.0)
    e.set(QuotaEntity("u", None), {})
    e.set(default, {})
    assert e.resolve(PRODUCER_BYTE_RATE, "u", "c") is None
