"""A real broker process serves kcat end to end: the smallest proof that the pieces fit."""
from __future__ import annotations

import subprocess

import pytest


def kcat(*args: str, data: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=data, capture_output=True, timeout=timeout)


def test_kcat_produces_and_consumes_with_keys(broker) -> None:
    """kcat -P with keys auto-creates the topic; kcat -C from the beginning returns the records
    with keys, contiguous offsets from 0, and -L shows the partition with leader and ISR."""
    out = kcat("-b", broker.bootstrap, "-P", "-t", "smoke", "-K:", data=b"k1:hello\nk2:world\n:no-key\n")
    assert out.returncode == 0, out.stderr
    got = kcat("-b", broker.bootstrap, "-C", "-t", "smoke", "-o", "beginning", "-e", "-f", "%k|%s|%o\\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout.decode().splitlines() == ["k1|hello|0", "k2|world|1", "|no-key|2"]
    meta = kcat("-b", broker.bootstrap, "-L", "-t", "smoke").stdout.decode()
    assert f"broker {broker.broker_id} at {broker.bootstrap}" in meta
    assert f"partition 0, leader {broker.broker_id}, replicas: {broker.broker_id}, isrs: {broker.broker_id}" in meta


def test_test_brokers_encode_strictly(broker) -> None:
    """The suite's strict encoding (tests/conftest.py) reaches broker subprocesses through their
    environment: the broker says so at start-up, so every response the integration tests get
    passed the unknown/missing-field check."""
    log = broker.log_path.read_text()
    assert "strict protocol encoding is on (KAFKALITE_STRICT_CODEC)" in log
    assert "EncodeError" not in log
