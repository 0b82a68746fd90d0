"""Client quotas on broker processes (Kafka 2.x): a producer_byte_rate set with kafkalite-configs
(AlterClientQuotas; the broker writes /config/clients/<id> and a /config/changes notification)
throttles that client to its quota and tells it so in throttle_time_ms, while another client is
unaffected; the tool describes, alters and deletes client and user quotas like kafka-configs.sh,
and a change written straight to ZooKeeper (Kafka 2.x's --zookeeper path) reaches the broker too."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer

from tests.support.topics import create_topic
from tests.support.waiting import wait_for
from zk_schema.config import ConfigEntityChangeNotification, ConfigEntityZNode

TOPIC = "quota-topic"
QUOTA = 200_000            # bytes per second
RECORD = 1000
#: Kafka's windowed rate lets a client with a backlog burst up to (samples - 1) windows' worth of
#: quota whenever old samples expire, then holds it back: its rate is only meaningful over many
#: windows, and a measurement's error is up to one burst. The brokers here keep 3 samples of 1 s
#: (quota.window.num 3; Kafka's default is 11) so that 20 s of measurement span several cycles.
WINDOW = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
MEASURED = 20.0


def set_client_quota(cluster, client_id: str, config: dict[str, str]) -> None:
    """What ``kafka-configs.sh --zookeeper .. --alter --entity-type clients`` does in Kafka 2.x."""
    zk, root = cluster.zk, cluster.chroot
    path = root + ConfigEntityZNode.path("clients", client_id)
    data = ConfigEntityZNode(config).encode()
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    zk.create(root + ConfigEntityChangeNotification.path_prefix(),
              ConfigEntityChangeNotification(f"clients/{client_id}").encode(), sequence=True, makepath=True)


def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.configs", "--bootstrap-server", bootstrap, *args],
                          text=True, capture_output=True, timeout=60)


def test_producer_over_its_byte_rate_is_throttled_to_the_quota(cluster_factory) -> None:
    """A producer (client.id greedy) that could send far more is held to within 20 % of its
    200 kB/s producer_byte_rate over 20 s, librdkafka reports throttle times > 0
    from the broker, and a second producer (client.id polite, no quota) sending 20 records a second
    next to it is never throttled and 99 % of its acknowledgements come within half a second (a
    throttled client waits up to a second per request; one late acknowledgement on a loaded CI
    machine says nothing of the quota)."""
    cluster = cluster_factory(1, WINDOW)
    broker = cluster.brokers[0]
    create_topic(cluster, TOPIC)        # one request: no admin client left reconnecting after the test
    out = configs(cluster.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "greedy",
                  "--add-config", f"producer_byte_rate={QUOTA}")
    assert out.returncode == 0 and out.stdout.strip() == "Completed updating config for client greedy.", out
    wait_for(lambda: "client quotas of clients/greedy" in broker.log_path.read_text(), 30,
             "the broker to apply the quota")

    throttles: dict[str, list[int]] = {"greedy": [], "polite": []}

    def producer(client_id: str) -> Producer:
        return Producer({"bootstrap.servers": cluster.bootstrap, "client.id": client_id, "acks": 1,
                         "linger.ms": 5, "batch.size": 16384,
                         "throttle_cb": lambda ev: throttles[client_id].append(int(ev.throttle_time * 1000))})

    acked: list[tuple[float, int]] = []          # (ack time, bytes) of greedy's records
    polite_latency: list[float] = []
    stop = threading.Event()

    def greedy_loop() -> None:
        p = producer("greedy")
        payload = b"g" * RECORD
        while not stop.is_set():
            try:
                p.produce(TOPIC, payload, on_delivery=lambda err, msg: err is None and
                          acked.append((time.monotonic(), len(msg.value()))))
            except BufferError:
                p.poll(0.05)
                continue
            p.poll(0)
        # what is still queued would drain at the quota's pace (half a minute); it is not measured
        p.purge(in_queue=True, in_flight=False)
        p.flush(30)
        p.close()

    def polite_loop() -> None:
        p = producer("polite")
        while not stop.is_set():
            sent = time.monotonic()
            p.produce(TOPIC, b"p" * 100, on_delivery=lambda err, msg, s=sent: err is None and
                      polite_latency.append(time.monotonic() - s))
            p.poll(0.05)
        p.flush(30)
        p.close()

    threads = [threading.Thread(target=greedy_loop, daemon=True), threading.Thread(target=polite_loop, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(MEASURED + 1)       # the measurement itself
    stop.set()
    for t in threads:
        t.join(60)

    start = acked[0][0]
    rate = sum(n for t, n in acked if t < start + MEASURED) / MEASURED
    print(f"\ngreedy: {rate:.0f} B/s against a quota of {QUOTA} B/s; throttle times reported: "
          f"{len(throttles['greedy'])}, max {max(throttles['greedy'], default=0)} ms; "
          f"polite: {len(polite_latency)} acks, worst {max(polite_latency, default=0) * 1000:.0f} ms")
    assert abs(rate - QUOTA) <= 0.2 * QUOTA
    assert time.monotonic() - start > MEASURED
    assert throttles["greedy"] and max(throttles["greedy"]) > 0
    assert throttles["polite"] == [] or max(throttles["polite"]) == 0
    assert len(polite_latency) >= 100
    p99 = sorted(polite_latency)[int(0.99 * len(polite_latency))]
    assert p99 < 0.5, f"99th percentile of the polite producer's acknowledgement latency: {p99 * 1000:.0f} ms"


def test_configs_tool_alters_and_describes_client_and_user_quotas(cluster_factory) -> None:
    """kafkalite-configs writes the znodes Kafka writes (/config/clients/<c>, /config/users/<default>,
    /config/users/<u>/clients/<c>, values as Kafka formats them) and describes them back with
    Kafka's lines; --delete-config removes a key; a quota written straight to ZooKeeper (with its
    notification) reaches the broker; an unknown key and a fractional byte rate are refused in
    one line."""
    cluster = cluster_factory(1)
    bs, zk, root = cluster.bootstrap, cluster.zk, cluster.chroot
    assert configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1",
                   "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048").returncode == 0
    done = configs(bs, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "request_percentage=50")
    assert done.stdout.strip() == "Completed updating default config for users in the cluster.", done
    assert configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-name", "app-2", "--add-config", "producer_byte_rate=4096").returncode == 0
    assert json.loads(zk.get(root + "/config/clients/app-1")[0]) == {
        "version": 1, "config": {"producer_byte_rate": "1024", "consumer_byte_rate": "2048"}}
    assert json.loads(zk.get(root + "/config/users/<default>")[0])["config"] == {"request_percentage": "50.0"}
    assert json.loads(zk.get(root + "/config/users/alice/clients/app-2")[0])["config"] == {"producer_byte_rate": "4096"}

    described = configs(bs, "--describe", "--entity-type", "clients", "--entity-name", "app-1")
    assert described.stdout.strip() == ("Quota configs for client-id 'app-1' are consumer_byte_rate=2048.0, "
                                        "producer_byte_rate=1024.0"), described
    users = configs(bs, "--describe", "--entity-type", "users").stdout.strip().splitlines()
    assert users == ["Quota configs for the default user-principal are request_percentage=50.0"]
    pair = configs(bs, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients")
    assert pair.stdout.strip() == ("Quota configs for user-principal 'alice', client-id 'app-2' are "
                                   "producer_byte_rate=4096.0"), pair

    assert configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1",
                   "--delete-config", "consumer_byte_rate").returncode == 0
    assert json.loads(zk.get(root + "/config/clients/app-1")[0])["config"] == {"producer_byte_rate": "1024"}

    set_client_quota(cluster, "from-zk", {"consumer_byte_rate": "777"})
    wait_for(lambda: "client quotas of clients/from-zk" in cluster.brokers[0].log_path.read_text(), 30,
             "the broker to read the ZooKeeper-written quota")
    assert "consumer_byte_rate=777.0" in configs(bs, "--describe", "--entity-type", "clients",
                                                 "--entity-name", "from-zk").stdout

    for bad, message in ((["--add-config", "bytes_per_hour=5"], "Invalid configuration key bytes_per_hour"),
                         (["--add-config", "producer_byte_rate=1.5"], "must be a Long value")):
        r = configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1", *bad)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_consumer_over_its_byte_rate_is_throttled_to_the_quota(cluster_factory) -> None:
    """A consumer (client.id slow-reader) with consumer_byte_rate 200 kB/s reading a topic that
    holds far more is held to within 20 % of it over 20 s, and librdkafka reports the broker's
    throttle times; the producer that filled the topic (no quota) was never throttled."""
    from confluent_kafka import Consumer, TopicPartition

    cluster = cluster_factory(1, WINDOW)
    create_topic(cluster, TOPIC)        # one request: no admin client left reconnecting after the test
    filler_throttles: list[float] = []
    # 16 kB batches: a fetch of at most 64 kB then carries several, as a steady stream would
    p = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "filler", "linger.ms": 5, "batch.size": 16384,
                  "throttle_cb": lambda ev: filler_throttles.append(ev.throttle_time)})
    for _ in range(9000):
        while True:
            try:
                p.produce(TOPIC, b"c" * RECORD)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    p.close()                   # or it keeps reconnecting to the stopped broker, into the test log
    assert filler_throttles == [] or max(filler_throttles) == 0
    out = configs(cluster.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "slow-reader",
                  "--add-config", f"consumer_byte_rate={QUOTA}")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: "client quotas of clients/slow-reader" in cluster.brokers[0].log_path.read_text(), 30,
             "the broker to apply the quota")

    throttles: list[float] = []
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "client.id": "slow-reader", "group.id": "slow",
                  "max.partition.fetch.bytes": 65536, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    received: list[tuple[float, int]] = []
    deadline = time.monotonic() + MEASURED + 10
    try:
        while time.monotonic() < deadline and (not received or received[-1][0] < received[0][0] + MEASURED):
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                received.append((time.monotonic(), len(msg.value())))
    finally:
        c.close()
    start = received[0][0]
    rate = sum(n for t, n in received if t < start + MEASURED) / MEASURED
    print(f"\nslow-reader: {rate:.0f} B/s against a quota of {QUOTA} B/s; throttle times reported: "
          f"{len(throttles)}, max {max(throttles, default=0) * 1000:.0f} ms")
    assert received[-1][0] - start >= MEASURED, "ran out of records before the measurement ended"
    assert abs(rate - QUOTA) <= 0.2 * QUOTA
    assert throttles and max(throttles) > 0
