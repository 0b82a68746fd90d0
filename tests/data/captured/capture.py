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
from kafkalite.protocol.apiversions import unsupported_version_response  # noqa: E402
from kafkalite.protocol.framing import FrameDecoder  # noqa: E402

log = logging.getLogger("capture")
ADVERTISED = {0: (0, 8), 1: (4, 11), 2: (1, 5), 3: (0, 8), 8: (2, 7), 9: (1, 5), 10: (0, 2),
              11: (0, 5), 12: (0, 3), 13: (0, 2), 14: (0, 3), 15: (0, 4), 16: (0, 2),
              18: (0, 3), 19: (2, 4), 20: (1, 3), 22: (0, 1), 23: (2, 3), 32: (1, 3),
              37: (0, 1), 42: (0, 1)}
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
    if key == 18:
        if ver > 3:
            return unsupported_version_response(corr, 0, 3)
        return codec.encode_response(18, ver, corr, {"error_code": 0, "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ADVERTISED.items()]})
    if key == 3:
        topics = [t["name"] for t in (body["topics"] or [])] or [TOPIC]
        return codec.encode_response(3, ver, corr, {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
            "cluster_id": "capture", "controller_id": 1,
            "topics": [{"error_code": 0, "name": t, "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                 "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]} for t in topics]})
    if key == 22:
        return codec.encode_response(22, ver, corr, {"producer_id": 1000, "producer_epoch": 0})
    if key == 0:
        if body["acks"] == 0:
            return []
        return codec.encode_response(0, ver, corr, {"responses": [
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
