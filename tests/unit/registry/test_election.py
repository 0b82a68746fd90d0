"""The primary election's pure half: Confluent's identity/assignment JSON and who is chosen."""
from __future__ import annotations

import json
from typing import Any

from kafkalite.registry.election import DUPLICATE_URLS, NO_ERROR, RegistryMember, choose_primary


def ident(port: int, eligible: bool = True, leader: bool = False, host: str = "h") -> dict[str, Any]:
    return {"version": 1, "host": host, "port": port, "master_eligibility": eligible, "scheme": "http",
            "leader": leader}


def test_smallest_eligible_url_wins_without_a_sitting_primary() -> None:
    members = [("m1", ident(8083)), ("m2", ident(8081, eligible=False)), ("m3", ident(8082))]
    assert choose_primary(members) == (NO_ERROR, "m3", ident(8082))


def test_a_sitting_primary_stays_primary() -> None:
    """Sticky: a new member with a smaller URL does not take over from the current primary."""
    members = [("new", ident(8081)), ("old", ident(8089, leader=True))]
    assert choose_primary(members)[1] == "old"
    # two claiming to be primary (after a split): fall back to the smallest URL
    assert choose_primary([("a", ident(8085, leader=True)), ("b", ident(8084, leader=True))])[1] == "b"


def test_no_eligible_member_and_duplicate_urls() -> None:
    assert choose_primary([("a", ident(1, eligible=False))]) == (NO_ERROR, None, None)
    assert choose_primary([("a", ident(1)), ("b", ident(1))])[0] == DUPLICATE_URLS


class _NoClient:
    pass


def test_member_speaks_the_sr_protocol() -> None:
    """JoinGroup offers protocol v0 with the identity JSON; the group leader gives every member
    the same assignment naming the primary (Confluent's "master"/"master_identity")."""
    member = RegistryMember(_NoClient(), "schema-registry", ident(8081))   # type: ignore[arg-type]
    assert member.protocol_type == "sr"
    [(name, meta)] = member.protocols()
    assert name == "v0" and json.loads(meta) == ident(8081)
    plan = member.assign("v0", [("a", json.dumps(ident(8082)).encode()), ("b", meta), ("c", b"\xff not json")])
    assert set(plan) == {"a", "b", "c"}
    decoded = {json.loads(v)["master"] for v in plan.values()}
    assert decoded == {"b"}
    assert json.loads(plan["a"]) == {"version": 1, "error": 0, "master": "b", "master_identity": ident(8081)}
