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

from tests.support.topics import wait_controller


@pytest.fixture(scope="module")
def broker(broker: Any) -> Any:  # noqa: F811 - wraps the harness fixture of the same name
    wait_controller(broker)
    return broker
