"""ACLs in ZooKeeper, as Kafka's AclAuthorizer reads and writes them (paths: ``zk_schema.acls``).

Every change is a conditional write on the resource znode's version (create if absent, set at
the version read, delete at the version read when no entry is left), followed by a sequential
change notification that every broker's authorizer watches. A lost race is
:class:`ZkVersionConflictError`; the caller re-reads and retries, as Kafka's
``updateResourceAcls`` does.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.coordination.errors import BadVersionError, NodeExistsError, NoNodeError, ZkVersionConflictError
from kafkalite.coordination.interfaces import ZooKeeper
from kafkalite.security.acl import AccessControlEntry, PatternType, ResourcePattern, ResourceType
from zk_schema import acls as zacl
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)

#: (entries, znode version); version -1: no znode
VersionedAcls = tuple[frozenset[AccessControlEntry], int]


class AclZkStore:
    """Reads and conditionally writes ``/kafka-acl*`` over one ZooKeeper session."""

    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk

    @defer.inlineCallbacks
    def ensure_paths(self) -> Any:
        """Kafka creates the roots at start (``ZkAclStore.securePaths``)."""
        for root in (*zacl.STORE_ROOTS.values(), zacl.LITERAL_CHANGES, zacl.EXTENDED_CHANGES):
            yield self.zk.ensure_path(root)

    @defer.inlineCallbacks
    def read(self, pattern: ResourcePattern) -> Any:
        """Fires the pattern's :data:`VersionedAcls`."""
        path = zacl.resource_path(pattern)
        data, stat = yield self.zk.get_or_none(path)
        if stat is None:
            return frozenset(), -1
        try:
            return zacl.decode_acls(path, data), stat.version
        except ZkDataError as exc:
            log.warning("ignoring unreadable ACL znode: %s", exc)
            return frozenset(), stat.version

    @defer.inlineCallbacks
    def load_all(self) -> Any:
        """Fires {pattern: VersionedAcls} for every stored pattern (the authorizer's start)."""
        out: dict[ResourcePattern, VersionedAcls] = {}
        for pattern_type in zacl.STORE_ROOTS:
            for rtype in zacl.STORED_RESOURCE_TYPES:
                names = yield self._children(zacl.type_path(pattern_type, rtype))
                for name in names:
                    pattern = ResourcePattern(rtype, name, pattern_type)
                    versioned = yield self.read(pattern)
                    if versioned[1] >= 0:
                        out[pattern] = versioned
        return out

    @defer.inlineCallbacks
    def _children(self, path: str) -> Any:
        try:
            names = yield self.zk.get_children(path)
        except NoNodeError:
            return []
        return names

    @defer.inlineCallbacks
    def write(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int) -> Any:
        """Set the pattern's entries if its znode is still at ``version`` (-1: absent); an empty
        set deletes the znode. Fires the new version (-1 after a delete); a changed znode fails
        with ZkVersionConflictError. The change notification follows a successful write."""
        path = zacl.resource_path(pattern)
        try:
            if not entries:
                if version >= 0:
                    yield self.zk.delete(path, version=version)
                new_version = -1
            elif version < 0:
                yield self.zk.create(path, zacl.encode_acls(entries), makepath=True)
                new_version = 0
            else:
                stat = yield self.zk.set(path, zacl.encode_acls(entries), version=version)
                new_version = stat.version
        except (NodeExistsError, BadVersionError, NoNodeError):
            raise ZkVersionConflictError(path, version, None) from None
        yield self.zk.create(zacl.change_prefix(pattern.pattern_type), zacl.encode_change(pattern),
                             sequence=True, makepath=True)
        return new_version


__all__ = ["AclZkStore", "VersionedAcls", "ResourceType"]
