"""Interop fixtures: the shared ``broker``, once real clients can administer it.

The harness counts a broker as started when its ``/brokers/ids`` znode exists; the controller
election finishes a few milliseconds later, and in that window Metadata answers ControllerId -1.
librdkafka's AdminClient that sees -1 can then wait for "the controller" until its own timeout
(observed: CreateTopics hanging 30 s on the first test of a module; FINDINGS.md F2), so interop
tests also wait until Metadata names this broker as controller.
"""
from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def broker(broker: Any) -> Any:  # noqa: F811 - wraps the harness fixture of the same name
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    wait_for(lambda: admin.list_topics(timeout=5).controller_id == broker.broker_id, 30,
             "Metadata to name the broker as controller")
    return broker
