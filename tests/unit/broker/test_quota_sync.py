"""QuotaConfigSync on the in-memory ZooKeeper: quotas present at start are loaded, later changes
arrive through /config/changes notifications (the very first one, sequence 0, included), written
by another broker's AlterClientQuotas path (KafkaZkClient.set_entity_config) or by hand."""
from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock

from kafkalite.broker.config_changes import ConfigChangeManager
from kafkalite.broker.quotas import BrokerQuotas, QuotaConfigSync, entity_path, parse_entity_path
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperServer
from kafkalite.quota import DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity
from tests.support.deferreds import drive as result


def test_quotas_load_at_start_and_follow_notifications() -> None:
    """A quota written before the broker starts is in force at once; the first notification ever
    (config_change_0000000000) and later ones update and remove quotas; a user's client entity
    with a name that needs URL encoding round-trips."""
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    writer = KafkaZkClient(zk=server.client("memory/k"))
    result(clock, writer.start())
    result(clock, writer.zk.create("/config/clients/early", b'{"version":1,"config":{"producer_byte_rate":"500"}}',
                                   makepath=True))
    reader = KafkaZkClient(zk=server.client("memory/k"))
    result(clock, reader.start())
    quotas = BrokerQuotas()
    sync = QuotaConfigSync(reader, quotas)
    changes = ConfigChangeManager(reader.zk)
    changes.add_watcher(sync)
    result(clock, changes.start())
    result(clock, sync.start())
    assert quotas.entities.resolve(PRODUCER_BYTE_RATE, "ANONYMOUS", "early") == (QuotaEntity(None, "early"), 500.0)

    result(clock, writer.set_entity_config("users/<default>", {"producer_byte_rate": "100"}))
    clock.advance(0.1)
    assert quotas.entities.resolve(PRODUCER_BYTE_RATE, "ANONYMOUS", "other") == (QuotaEntity(DEFAULT, None), 100.0)

    odd = QuotaEntity("alice", "app/1 *")
    assert parse_entity_path(entity_path(odd)) == odd and "/" not in entity_path(odd).split("/")[-1]
    result(clock, sync.write(odd, {PRODUCER_BYTE_RATE: 42}))
    clock.advance(0.1)
    assert quotas.entities.resolve(PRODUCER_BYTE_RATE, "alice", "app/1 *") == (odd, 42.0)

    result(clock, writer.set_entity_config("users/<default>", {}))
    clock.advance(0.1)
    assert quotas.entities.resolve(PRODUCER_BYTE_RATE, "ANONYMOUS", "other") is None
