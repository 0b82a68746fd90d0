"""Client quotas on a broker process (Kafka 2.x): a producer_byte_rate in /config/clients/<id>,
announced through /config/changes as Kafka's ZooKeeper-era kafka-configs writes it, throttles that
client to its quota and tells it so in throttle_time_ms, while another client is unaffected."""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_for
from zk_schema.config import ConfigEntityChangeNotification, ConfigEntityZNode

TOPIC = "quota-topic"
QUOTA = 200_000            # bytes per second
RECORD = 1000
#: seconds of acknowledgements measured: two full quota windows (quota.window.num 11 x 1 s, Kafka's
#: defaults). Kafka's windowed rate lets a client with a backlog burst up to (samples - 1) windows'
#: worth of quota whenever old samples expire and then holds it back, so the rate is only
#: meaningful over whole windows.
MEASURED = 22.0


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


def test_producer_over_its_byte_rate_is_throttled_to_the_quota(cluster_factory) -> None:
    """A producer (client.id greedy) that could send far more is held to within 20 % of its
    200 kB/s producer_byte_rate over 22 s (two quota windows), librdkafka reports throttle times > 0
    from the broker, and a second producer (client.id polite, no quota) sending 20 records a second
    next to it is never throttled and keeps its acknowledgement latency under a second."""
    cluster = cluster_factory(1)
    broker = cluster.brokers[0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    set_client_quota(cluster, "greedy", {"producer_byte_rate": str(QUOTA)})
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
        p.flush(30)

    def polite_loop() -> None:
        p = producer("polite")
        while not stop.is_set():
            sent = time.monotonic()
            p.produce(TOPIC, b"p" * 100, on_delivery=lambda err, msg, s=sent: err is None and
                      polite_latency.append(time.monotonic() - s))
            p.poll(0.05)
        p.flush(30)

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
    assert max(polite_latency) < 1.0
