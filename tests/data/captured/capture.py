#!/usr/bin/env python3
"""One-off: record the request frames real clients send, for tests/unit/protocol/test_captured.py.

Listens on 127.0.0.1 (ephemeral port), answers ApiVersions with the recommended table of
kafka-protocol.md §6 (the v0 UNSUPPORTED_VERSION answer above v3), Metadata with one broker
and one single-partition topic, InitProducerId and Produce with success, and writes every
request frame (without the size prefix) to ``<client>-<nn>-<Api>-v<version>.bin`` here.
Run: .venv/bin/python tests/data/captured/capture.py
"""
from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from kafkalite.protocol import codec  # noqa: E402
from kafkalite.protocol.api_keys import ApiKey  # noqa: E402
from kafkalite.protocol.apiversions import unsupported_version_response  # noqa: E402
from kafkalite.protocol.framing import FrameDecoder  # noqa: E402

log = logging.getLogger("capture")
ADVERTISED = {
    ApiKey.PRODUCE: (0, 8), ApiKey.FETCH: (4, 11), ApiKey.LIST_OFFSETS: (1, 5), ApiKey.METADATA: (0, 8),
    ApiKey.OFFSET_COMMIT: (2, 7), ApiKey.OFFSET_FETCH: (1, 5), ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 3), ApiKey.LEAVE_GROUP: (0, 2), ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4), ApiKey.LIST_GROUPS: (0, 2), ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 4), ApiKey.DELETE_TOPICS: (1, 3), ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3), ApiKey.DESCRIBE_CONFIGS: (1, 3), ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1)}
TOPIC = "captured-topic"


class Recorder:
    def __init__(self) -> None:
        self.label = "none"
        self.count = 0
        self.lock = threading.Lock()

    def save(self, api_key: int, version: int, frame: bytes) -> None:
        with self.lock:
            self.count += 1
            name = f"{self.label}-{self.count:02d}-{codec.API_KEYS[api_key]}-v{version}.bin"
        (HERE / name).write_bytes(frame)


def answer(header: codec.RequestHeader, body: dict, port: int) -> list | None:
    key, ver, corr = header.api_key, header.api_version, header.correlation_id
    if key == ApiKey.API_VERSIONS:
        if ver > 3:
            return unsupported_version_response(corr, 0, 3)
        return codec.encode_response(ApiKey.API_VERSIONS, ver, corr, {"error_code": 0, "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ADVERTISED.items()]})
    if key == ApiKey.METADATA:
        topics = [t["name"] for t in (body["topics"] or [])] or [TOPIC]
        return codec.encode_response(ApiKey.METADATA, ver, corr, {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
            "cluster_id": "capture", "controller_id": 1,
            "topics": [{"error_code": 0, "name": t, "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                 "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]} for t in topics]})
    if key == ApiKey.INIT_PRODUCER_ID:
        return codec.encode_response(ApiKey.INIT_PRODUCER_ID, ver, corr, {"producer_id": 1000, "producer_epoch": 0})
    if key == ApiKey.PRODUCE:
        if body["acks"] == 0:
            return []
        return codec.encode_response(ApiKey.PRODUCE, ver, corr, {"responses": [
            {"name": t["name"], "partition_responses": [
                {"index": p["index"], "base_offset": 0} for p in t["partition_data"]]}
            for t in body["topic_data"]]})
    return None


def serve(conn: socket.socket, port: int, rec: Recorder) -> None:
    dec = FrameDecoder(1 << 24)
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for frame in dec.feed(data):
                header = codec.read_request_header(frame)
                rec.save(header.api_key, header.api_version, bytes(frame))
                body = codec.decode_request_body(header, frame) if header.api_version <= \
                    codec.valid_versions(header.api_key)[1] else {}
                reply = answer(header, body, port)
                if reply is None:
                    return
                conn.sendall(b"".join(reply))


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    for old in HERE.glob("*.bin"):
        old.unlink()
    rec = Recorder()
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def accept_loop() -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn, port, rec), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()
    boot = f"127.0.0.1:{port}"

    rec.label = "kcat-L"
    subprocess.run(["kcat", "-b", boot, "-L", "-m", "5"], check=False, timeout=30,
                   capture_output=True)
    rec.label, rec.count = "kcat-P", 0
    subprocess.run(["kcat", "-b", boot, "-P", "-t", TOPIC, "-m", "5"], input=b"hello-kcat\n",
                   check=False, timeout=30, capture_output=True)

    rec.label, rec.count = "confluent", 0
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": boot, "client.id": "capture-ck",
                                         "linger.ms": 0})
    producer.produce(TOPIC, key=b"k1", value=b"hello-confluent")
    log.info("confluent flush left %s", producer.flush(10))

    rec.label, rec.count = "kafka-python", 0
    import kafka
    kp = kafka.KafkaProducer(bootstrap_servers=boot, client_id="capture-kp")
    kp.send(TOPIC, key=b"k2", value=b"hello-kafka-python").get(timeout=10)
    kp.close(timeout=5)
    log.info("captured %d files", len(list(HERE.glob("*.bin"))))


if __name__ == "__main__":
    main()
