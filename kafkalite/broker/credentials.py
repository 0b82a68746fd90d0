"""Users' SCRAM credentials in ZooKeeper (``/config/users/<user>``), as Kafka keeps them.

One config entity per user whose entries ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` hold
``salt=...,stored_key=...,server_key=...,iterations=N`` (other entries, e.g. quotas another
tool wrote, are left as they are). Authentication reads a credential afresh each time (a
changed one applies to the next connection); DescribeUserScramCredentials and
AlterUserScramCredentials (KIP-554) read and write the same znodes, with the change
notification Kafka writes.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Any, Iterable

from twisted.internet import defer

from kafkalite.coordination.errors import NoNodeError
from kafkalite.security import scram
from zk_schema import desanitize, paths, sanitize

USERS = "users"


def user_entity_path(user: str) -> str:
    """``users/<sanitized user>`` under ``/config``: where Kafka keeps a user's SCRAM credentials."""
    return f"{USERS}/{sanitize(user)}"


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> scram.ScramCredential:
    """What the broker stores for an AlterUserScramCredentials upsertion (the client sends the
    salted password, never the password): StoredKey = H(HMAC(salted, "Client Key")),
    ServerKey = HMAC(salted, "Server Key")."""
    name = scram.MECHANISMS[mechanism][0]
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    return scram.ScramCredential(salt, hashlib.new(name, client_key).digest(),
                                 hmac.new(salted_password, b"Server Key", name).digest(), iterations)


class UserCredentials:
    """The broker's view of ``/config/users``, over its KafkaZkClient."""

    def __init__(self, kafka_zk: Any) -> None:
        self.kafka_zk = kafka_zk

    @defer.inlineCallbacks
    def credential(self, mechanism: str, user: str) -> Any:
        """Fires the user's ScramCredential for ``mechanism``, or None."""
        entity = yield self.kafka_zk.get_entity_config(user_entity_path(user))
        text = entity.get(mechanism)
        return scram.ScramCredential.from_config(text) if text else None

    @defer.inlineCallbacks
    def describe(self, user: str) -> Any:
        """Fires [(mechanism, iterations)] of the user's stored SCRAM credentials."""
        entity = yield self.kafka_zk.get_entity_config(user_entity_path(user))
        out = []
        for mechanism in scram.MECHANISMS:
            if mechanism in entity:
                out.append((mechanism, scram.ScramCredential.from_config(entity[mechanism]).iterations))
        return out

    @defer.inlineCallbacks
    def users(self) -> Any:
        """Fires every user name with a config entity."""
        try:
            children = yield self.kafka_zk.zk.get_children(f"{paths.CONFIG}/{USERS}")
        except NoNodeError:
            children = []
        return [desanitize(c) for c in children]

    @defer.inlineCallbacks
    def alter(self, user: str, upserts: Iterable[tuple[str, scram.ScramCredential]], deletes: Iterable[str]) -> Any:
        """Apply one user's changes in one write (plus the change notification)."""
        entity = yield self.kafka_zk.get_entity_config(user_entity_path(user))
        for mechanism in deletes:
            entity.pop(mechanism, None)
        for mechanism, credential in upserts:
            entity[mechanism] = credential.to_config()
        yield self.kafka_zk.set_entity_config(user_entity_path(user), entity)
