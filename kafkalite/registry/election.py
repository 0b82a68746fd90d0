"""Electing the primary through the Kafka group protocol, as Confluent's registry does.

Every instance joins the group ``schema.registry.group.id`` (default ``schema-registry``) with
protocol type ``sr`` and one protocol ``v0`` whose metadata is its identity, Confluent's JSON::

    {"version":1,"host":"h","port":8081,"master_eligibility":true,"scheme":"http","leader":false}

The group's leader (the member the coordinator picks, not necessarily the primary) assigns every
member the same assignment::

    {"version":1,"error":0,"master":"<member id>","master_identity":{...identity...}}

The primary is the eligible member that already is primary (sticky, when exactly one says so),
else the eligible member with the smallest URL; error 1 (DUPLICATE_URLS) when two members share
a URL. While a rebalance is under way no instance is primary (Confluent's ``onRevoked``), so writes
answer 50004 for that moment. A killed primary leaves the group when its session times out
(``kafkagroup.session.timeout.ms``); the survivors' heartbeats then learn of the rebalance.

The membership (join, sync, heartbeats) is :class:`kafkalite.client.group.GroupMember`'s; the
loop runs on its own thread and reports each outcome to the reactor with ``callFromThread``.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable

from kafkalite.client import ClientError, KafkaClient
from kafkalite.client.group import GroupMember

log = logging.getLogger(__name__)

PROTOCOL_TYPE, PROTOCOL = "sr", "v0"
NO_ERROR, DUPLICATE_URLS = 0, 1


def identity_url(identity: dict[str, Any]) -> str:
    return f"{identity.get('scheme') or 'http'}://{identity.get('host')}:{identity.get('port')}"


def choose_primary(members: list[tuple[str, dict[str, Any]]]) -> tuple[int, str | None, dict[str, Any] | None]:
    """(error, member id, identity) of the primary among ``(member id, identity)`` pairs; pure."""
    eligible = [(m, i) for m, i in members if i.get("master_eligibility", True)]
    sitting = [(m, i) for m, i in eligible if i.get("leader")]
    if len(sitting) == 1:
        chosen: tuple[str, dict[str, Any]] | None = sitting[0]
    else:
        chosen = min(eligible, key=lambda mi: identity_url(mi[1]), default=None)
    urls = [identity_url(i) for _, i in members]
    error = DUPLICATE_URLS if len(set(urls)) != len(urls) else NO_ERROR
    return error, (chosen[0] if chosen else None), (chosen[1] if chosen else None)


class RegistryMember(GroupMember):
    """A group member speaking the ``sr`` protocol."""

    protocol_type = PROTOCOL_TYPE

    def __init__(self, client: KafkaClient, group_id: str, identity: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(client, group_id, assignors=[], **kwargs)
        self.identity = identity

    def protocols(self) -> list[tuple[str, bytes]]:
        return [(PROTOCOL, json.dumps(self.identity, separators=(",", ":")).encode())]

    def assign(self, protocol: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        decoded = []
        for member_id, meta in members:
            try:
                identity = json.loads(bytes(meta))
                if isinstance(identity, dict):
                    decoded.append((member_id, identity))
                    continue
            except ValueError:
                pass
            log.warning("group member %s sent unreadable identity %r", member_id, bytes(meta)[:200])
        error, leader, leader_identity = choose_primary(decoded)
        if error == DUPLICATE_URLS:
            log.error("schema registry instances share a URL; set host.name on each to an address the "
                      "others can reach")
        assignment = json.dumps({"version": 1, "error": error, "master": leader, "master_identity": leader_identity},
                                separators=(",", ":")).encode()
        return {member_id: assignment for member_id, _ in members}


class LeaderElection:
    """Keeps this instance in the group and tells ``on_primary`` who the primary is (None = unknown)."""

    def __init__(self, reactor: Any, client: KafkaClient, group_id: str, identity: dict[str, Any],
                 on_primary: Callable[[str | None], None], *, session_timeout_ms: int = 10000,
                 heartbeat_interval_ms: int = 3000) -> None:
        self.reactor = reactor
        self.on_primary = on_primary
        self.member = RegistryMember(client, group_id, dict(identity), session_timeout_ms=session_timeout_ms,
                                     rebalance_timeout_ms=max(session_timeout_ms, 30000),
                                     heartbeat_interval_ms=heartbeat_interval_ms)
        self.my_url = identity_url(identity)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="registry-election", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.member.needs_rejoin:
                self._stop.wait(0.1)
                continue
            self.reactor.callFromThread(self.on_primary, None)
            try:
                raw = self.member.join_group(time.monotonic() + 60)
                assignment = json.loads(raw) if raw else {}
            except (ClientError, ValueError) as exc:
                if not self._stop.is_set():
                    log.warning("joining the registry group failed: %s", exc)
                    self._stop.wait(1.0)
                continue
            primary_identity = assignment.get("master_identity") if isinstance(assignment, dict) else None
            if assignment.get("error", NO_ERROR) != NO_ERROR:
                log.error("the registry group's assignment reports error %s (duplicate URLs); no primary",
                          assignment.get("error"))
                primary_identity = None
            url = identity_url(primary_identity) if isinstance(primary_identity, dict) else None
            self.member.identity["leader"] = url == self.my_url        # sticky at the next rebalance
            log.info("registry group generation %d: primary %s", self.member.generation, url)
            self.reactor.callFromThread(self.on_primary, url)

    def stop(self) -> None:
        self._stop.set()
        try:
            self.member.leave()
        except ClientError as exc:
            log.debug("leaving the registry group: %s", exc)
        if self._thread is not None:
            self._thread.join(5)
