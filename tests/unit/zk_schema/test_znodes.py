"""zk_schema payloads: exact bytes, decode of Kafka's own JSON, and malformed-payload errors."""
from __future__ import annotations

import json

import pytest

import zk_schema as z
from zk_schema import ZkDataError

KAFKA_BROKER_V5 = (b'{"version":5,"host":"10.0.0.1","port":9092,"jmx_port":-1,'
                   b'"timestamp":"1700000000000","endpoints":["PLAINTEXT://10.0.0.1:9092"],'
                   b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                   b'"rack":"r1","features":{}}')


def test_broker_registration_decodes_kafka_sample_and_reencodes_same_json():
    """The zookeeper-layout.md §1.1 sample decodes field by field and re-encodes to equal JSON."""
    reg = z.BrokerRegistration.decode(KAFKA_BROKER_V5, 1)
    assert (reg.broker_id, reg.host, reg.port, reg.jmx_port, reg.timestamp_ms, reg.rack) == (
        1, "10.0.0.1", 9092, -1, 1700000000000, "r1")
    assert reg.endpoints == (z.EndPoint("PLAINTEXT", "10.0.0.1", 9092, "PLAINTEXT"),)
    assert json.loads(reg.encode()) == json.loads(KAFKA_BROKER_V5)
    assert reg.encode() == KAFKA_BROKER_V5


def test_broker_registration_v4_without_rack_and_two_listeners():
    """Version 4 omits features; rack is absent when unset; host/port follow the PLAINTEXT listener."""
    reg = z.BrokerRegistration(
        7, (z.EndPoint("INTERNAL", "h1", 9093, "SSL"), z.EndPoint("EXTERNAL", "::1", 9092)),
        timestamp_ms=5, version=4)
    obj = json.loads(reg.encode())
    assert obj == {"version": 4, "host": "::1", "port": 9092, "jmx_port": -1, "timestamp": "5",
                   "endpoints": ["INTERNAL://h1:9093", "EXTERNAL://[::1]:9092"],
                   "listener_security_protocol_map": {"INTERNAL": "SSL", "EXTERNAL": "PLAINTEXT"}}
    assert z.BrokerRegistration.decode(reg.encode(), 7) == reg


def test_broker_registration_reads_old_versions():
    """Version 1 (host/port only) and 2 (endpoints named by protocol) still decode."""
    v1 = z.BrokerRegistration.decode(b'{"version":1,"host":"a","port":1,"jmx_port":-1,"timestamp":"2"}', 3)
    assert v1.endpoints == (z.EndPoint("PLAINTEXT", "a", 1, "PLAINTEXT"),)
    v2 = z.BrokerRegistration.decode(
        b'{"version":2,"host":null,"port":-1,"jmx_port":9999,"timestamp":"2","endpoints":["SSL://b:2"]}', 3)
    assert v2.endpoints == (z.EndPoint("SSL", "b", 2, "SSL"),) and v2.host is None and v2.port == -1


@pytest.mark.parametrize("payload, fragment", [
    (b"", "empty"),
    (b"{not json", "not JSON"),
    (b"[1]", "JSON object"),
    (b'{"version":6,"jmx_port":-1,"timestamp":"1"}', "unsupported version"),
    (KAFKA_BROKER_V5.replace(b'"timestamp":"1700000000000"', b'"timestamp":1700000000000'), "timestamp"),
    (KAFKA_BROKER_V5.replace(b'"PLAINTEXT://10.0.0.1:9092"', b'"garbage"'), "endpoint"),
    (KAFKA_BROKER_V5.replace(b'{"PLAINTEXT":"PLAINTEXT"}', b'{}'), "listener"),
    (KAFKA_BROKER_V5.replace(b',"features":{}', b''), "features"),
])
def test_broker_registration_malformed(payload, fragment):
    """Malformed registrations raise ZkDataError (a ValueError) that says what is wrong."""
    with pytest.raises(ZkDataError, match=fragment) as info:
        z.BrokerRegistration.decode(payload, 1)
    assert isinstance(info.value, ValueError)
    assert "/brokers/ids/1" in str(info.value)


def test_controller_znode_exact_bytes_and_v2():
    """/controller encodes Kafka's version-1 JSON with a string timestamp; 3.x v2 also decodes."""
    assert z.ControllerZNode(2, 1700000000000).encode() == (
        b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}')
    v2 = z.ControllerZNode.decode(b'{"version":2,"brokerid":3,"timestamp":"9","kraftControllerEpoch":-1}')
    assert v2 == z.ControllerZNode(3, 9, -1)
    with pytest.raises(ZkDataError, match="brokerid"):
        z.ControllerZNode.decode(b'{"version":1,"brokerid":"3","timestamp":"9"}')


def test_controller_epoch_is_plain_decimal_text():
    """/controller_epoch holds "7", not JSON; anything else is rejected."""
    assert z.ControllerEpochZNode(7).encode() == b"7"
    assert z.ControllerEpochZNode.decode(b"42").epoch == 42
    for bad in (b"", b'{"epoch":1}', b"1.5", b"x"):
        with pytest.raises(ZkDataError):
            z.ControllerEpochZNode.decode(bad)


def test_cluster_id_version_is_a_string_and_ids_are_kafka_uuids():
    """/cluster/id writes version "1" (string); new ids are 22-char URL-safe base64 without padding."""
    cid = z.new_cluster_id()
    assert len(cid) == 22 and "=" not in cid and not cid.startswith("-")
    assert set(cid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert z.decode_uuid(cid).bytes and z.encode_uuid(z.decode_uuid(cid)) == cid
    assert z.ClusterIdZNode(cid).encode() == b'{"version":"1","id":"' + cid.encode() + b'"}'
    assert z.ClusterIdZNode.decode(b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}').id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len({z.new_cluster_id() for _ in range(100)}) == 100
    with pytest.raises(ZkDataError, match="version"):
        z.ClusterIdZNode.decode(b'{"version":"2","id":"x"}')


def test_topic_znode_kafka_sample_roundtrip():
    """The §1.2 v3 sample decodes to partitions/topic id and re-encodes to the same JSON."""
    raw = (b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},'
           b'"adding_replicas":{},"removing_replicas":{},"topic_id":"HvJtL8vqT6aZ3m5Q0mU7aA"}')
    node = z.TopicZNode.decode(raw, "t")
    assert node.assignment() == {0: [1, 2, 3], 1: [2, 3, 1]}
    assert node.topic_id == "HvJtL8vqT6aZ3m5Q0mU7aA"
    assert node.encode() == raw
    assert z.TopicZNode.path("t") == "/brokers/topics/t"


def test_topic_znode_older_versions_and_reassignment_maps():
    """v1 (partitions only) decodes; only non-empty adding/removing entries are written."""
    v1 = z.TopicZNode.decode(b'{"version":1,"partitions":{"10":[5],"2":[4]}}')
    assert v1.assignment() == {2: [4], 10: [5]} and v1.topic_id is None
    node = z.TopicZNode({0: [1, 2]}, adding_replicas={0: [2], 1: []}, removing_replicas={})
    assert json.loads(node.encode()) == {"version": 3, "partitions": {"0": [1, 2]},
                                         "adding_replicas": {"0": [2]}, "removing_replicas": {}}


@pytest.mark.parametrize("payload", [
    b'{"version":4,"partitions":{}}',
    b'{"version":3,"partitions":{"a":[1]}}',
    b'{"version":3,"partitions":{"01":[1]}}',
    b'{"version":3,"partitions":{"0":[1,"2"]}}',
    b'{"version":3,"partitions":{"0":[1]},"adding_replicas":[]}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"short"}',
    b'{"version":3}',
])
def test_topic_znode_malformed(payload):
    """Bad versions, partition keys, replica lists, reassignment maps or topic ids are refused."""
    with pytest.raises(ZkDataError):
        z.TopicZNode.decode(payload, "t")


def test_partition_state_exact_bytes_and_path():
    """The §1.3 sample decodes; encode writes the same keys; path is partitions/<p>/state."""
    raw = b'{"version":1,"leader":1,"leader_epoch":4,"controller_epoch":7,"isr":[1,3]}'
    state = z.TopicPartitionStateZNode.decode(raw)
    assert state == z.TopicPartitionStateZNode(leader=1, leader_epoch=4, isr=(1, 3), controller_epoch=7)
    assert state.encode() == raw
    assert z.TopicPartitionStateZNode.path("t", 3) == "/brokers/topics/t/partitions/3/state"
    with pytest.raises(ZkDataError, match="isr"):
        z.TopicPartitionStateZNode.decode(b'{"version":1,"leader":1,"leader_epoch":4,"controller_epoch":7}')
    with pytest.raises(ZkDataError, match="leader"):
        z.TopicPartitionStateZNode.decode(b'{"version":1,"leader":true,"leader_epoch":4,"controller_epoch":7,"isr":[]}')


def test_topic_config_and_change_notification():
    """Topic config is {"version":1,"config":{...}} with string values; notifications are v2 entity paths."""
    assert z.TopicConfigZNode({}).encode() == b'{"version":1,"config":{}}'
    cfg = z.TopicConfigZNode.decode(b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert cfg.config == {"retention.ms": "1000"}
    assert z.TopicConfigZNode.path("t") == "/config/topics/t"
    with pytest.raises(ZkDataError, match="strings"):
        z.TopicConfigZNode.decode(b'{"version":1,"config":{"retention.ms":1000}}')
    note = z.ConfigEntityChangeNotification.for_topic("t")
    assert note.encode() == b'{"version":2,"entity_path":"topics/t"}'
    assert z.ConfigEntityChangeNotification.path_prefix() == "/config/changes/config_change_"
    v1 = z.ConfigEntityChangeNotification.decode(b'{"version":1,"entity_type":"topics","entity_name":"x"}')
    assert v1.entity_path == "topics/x" and v1.entity_type == "topics"
    with pytest.raises(ZkDataError):
        z.ConfigEntityChangeNotification.decode(b'{"version":2,"entity_path":"nosl"}')


def test_producer_id_block_strings_and_next_block():
    """Block bounds are JSON strings; the next block starts right after the previous end."""
    raw = b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    block = z.ProducerIdBlockZNode.decode(raw)
    assert block == z.ProducerIdBlockZNode.first(1) and block.encode() == raw
    assert block.next_block(2) == z.ProducerIdBlockZNode(2, 1000, 1999)
    with pytest.raises(ZkDataError):
        z.ProducerIdBlockZNode.decode(b'{"version":1,"broker":1,"block_start":0,"block_end":"999"}')
    with pytest.raises(ZkDataError):
        z.ProducerIdBlockZNode.decode(b'{"version":1,"broker":1,"block_start":"9","block_end":"1"}')


def test_admin_and_notification_payloads():
    """Preferred election, reassignment, ISR change and log-dir event JSON as Kafka writes it."""
    pre = z.PreferredReplicaElection([("t", 0), ("u", 2)])
    assert pre.encode() == b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":2}]}'
    assert z.PreferredReplicaElection.decode(pre.encode()) == pre
    ra = z.ReassignPartitions.decode(
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}')
    assert ra.reassignments == {("t", 0): (1, 2, 3)}
    assert z.ReassignPartitions.decode(ra.encode()) == ra
    isr = z.IsrChangeNotification([("t", 1)])
    assert isr.encode() == b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'
    assert z.IsrChangeNotification.path_prefix() == "/isr_change_notification/isr_change_"
    assert z.LogDirEventNotification(4).encode() == b'{"version":1,"broker":4,"event":1}'
    assert z.DeleteTopicsZNode.path("t") == "/admin/delete_topics/t"
    with pytest.raises(ZkDataError):
        z.IsrChangeNotification.decode(b'{"version":1,"partitions":[{"topic":"t"}]}')
    with pytest.raises(ZkDataError):
        z.ReassignPartitions.decode(b'{"version":1,"partitions":[{"topic":"t","partition":0}]}')


def test_persistent_paths_and_sequence_numbers():
    """PERSISTENT_PATHS is Kafka's startup list (parents never after children); seq suffix parses."""
    assert set(z.PERSISTENT_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips"}
    assert z.sequence_number("/isr_change_notification/isr_change_0000000042", "isr_change_") == 42
    with pytest.raises(ValueError):
        z.sequence_number("isr_change_42", "isr_change_")
    with pytest.raises(ValueError):
        z.sequence_number("config_change_0000000001", "isr_change_")
