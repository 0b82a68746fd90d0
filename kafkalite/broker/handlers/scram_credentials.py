"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554, over
``/config/users/<user>`` (``broker/credentials.py``).

Kafka's checks, per user: a name must not be empty (UNACCEPTABLE_CREDENTIAL), a mechanism is
SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) (else UNSUPPORTED_SASL_MECHANISM), iterations between
4096 and 16384 (UNACCEPTABLE_CREDENTIAL), one change per (user, mechanism) per request
(DUPLICATE_RESOURCE), a deleted credential must exist (RESOURCE_NOT_FOUND). Any error leaves
all of that user's changes undone. Upsertions carry the salted password (the client hashes);
the broker derives StoredKey/ServerKey and stores Kafka's credential string.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.credentials import credential_from_salted_password
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.security import scram
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsRequestScramCredentialDeletion,
    AlterUserScramCredentialsRequestScramCredentialUpsertion, AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResponseAlterUserScramCredentialsResult, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult)

_Change = AlterUserScramCredentialsRequestScramCredentialDeletion | AlterUserScramCredentialsRequestScramCredentialUpsertion


@dataclass
class _UserChanges:
    """One user's part of an AlterUserScramCredentials request."""
    deletions: list[AlterUserScramCredentialsRequestScramCredentialDeletion] = field(default_factory=list)
    upsertions: list[AlterUserScramCredentialsRequestScramCredentialUpsertion] = field(default_factory=list)

BY_ID = {v: k for k, v in scram.MECHANISM_IDS.items()}


@api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
@defer.inlineCallbacks
def handle_describe_user_scram_credentials(ctx: RequestContext, req: DescribeUserScramCredentialsRequest,
                                           ) -> Generator[Any, Any, DescribeUserScramCredentialsResponse]:
    requested = [u["name"] for u in (req["users"] or [])]      # null: every user
    results: list[DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult] = []
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "error_message": "Cluster authorization failed.", "results": []}
    if not requested:
        names = yield ctx.credentials.users()
        for name in sorted(names):
            infos = yield ctx.credentials.describe(name)
            if infos:
                results.append(_described(name, infos))
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}
    duplicates = {n for n in requested if requested.count(n) > 1}
    for name in dict.fromkeys(requested):
        if name in duplicates:
            results.append(_user_error(name, ErrorCode.DUPLICATE_RESOURCE,
                                       "Cannot describe SCRAM credentials for the same user twice in a single request"))
            continue
        infos = yield ctx.credentials.describe(name)
        if not infos:
            results.append(_user_error(name, ErrorCode.RESOURCE_NOT_FOUND,
                                       "Attempt to describe a user credential that does not exist"))
        else:
            results.append(_described(name, infos))
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _described(name: str, infos: list[tuple[str, int]],
               ) -> DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult:
    return {"user": name, "error_code": 0, "error_message": None,
            "credential_infos": [{"mechanism": scram.MECHANISM_IDS[m], "iterations": i} for m, i in infos]}


def _user_error(name: str, code: ErrorCode, message: str,
                ) -> DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult:
    return {"user": name, "error_code": int(code), "error_message": message, "credential_infos": []}


@api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
@defer.inlineCallbacks
def handle_alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest,
                                        ) -> Generator[Any, Any, AlterUserScramCredentialsResponse]:
    if not ctx.authorize(Operation.ALTER, ResourceType.CLUSTER):
        names = dict.fromkeys([d["name"] for d in req["deletions"]] + [u["name"] for u in req["upsertions"]])
        return {"throttle_time_ms": 0, "results": [{"user": n, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                                    "error_message": "Cluster authorization failed."} for n in names]}
    changes: dict[str, _UserChanges] = defaultdict(_UserChanges)
    for d in req["deletions"]:
        changes[d["name"]].deletions.append(d)
    for u in req["upsertions"]:
        changes[u["name"]].upsertions.append(u)
    results: list[AlterUserScramCredentialsResponseAlterUserScramCredentialsResult] = []
    for user, change in changes.items():
        error = yield _check(ctx, user, change)
        if error is not None:
            results.append({"user": user, "error_code": int(error[0]), "error_message": error[1]})
            continue
        upserts = [(BY_ID[c["mechanism"]], credential_from_salted_password(
            BY_ID[c["mechanism"]], bytes(c["salt"]), bytes(c["salted_password"]), c["iterations"]))
            for c in change.upsertions]
        deletes = [BY_ID[c["mechanism"]] for c in change.deletions]
        yield ctx.credentials.alter(user, upserts, deletes)
        results.append({"user": user, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "results": results}


@defer.inlineCallbacks
def _check(ctx: RequestContext, user: str, change: _UserChanges) -> Any:
    """(code, message) of the first problem with one user's changes, or None (deletions are
    checked before upsertions, each in request order)."""
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    seen: set[int] = set()
    items: list[tuple[_Change, AlterUserScramCredentialsRequestScramCredentialUpsertion | None]] = [
        *((d, None) for d in change.deletions), *((u, u) for u in change.upsertions)]
    for c, upsert in items:
        if c["mechanism"] not in BY_ID:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if c["mechanism"] in seen:
            return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        seen.add(c["mechanism"])
        if upsert is not None:
            mechanism = BY_ID[upsert["mechanism"]]
            if upsert["iterations"] < scram.MECHANISMS[mechanism][1]:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            if upsert["iterations"] > scram.MAX_ITERATIONS:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            if not upsert["salt"] or not upsert["salted_password"]:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    stored = yield ctx.credentials.describe(user)
    present = {m for m, _ in stored}
    for d in change.deletions:
        if BY_ID[d["mechanism"]] not in present:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return None
