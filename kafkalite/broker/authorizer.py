"""The broker's ACL authorizer (Kafka's ``AclAuthorizer``): a cache of ``/kafka-acl*`` kept
current by the change notifications, the decision of ``security/acl.py`` over it, and the
writes of CreateAcls/DeleteAcls.

At start every stored pattern is read; then both change roots are listened to (one
``coordination.change_notifications`` listener each, purging notifications after 15 minutes as
Kafka does), and each new notification re-reads the one pattern it names (so a change made through any broker reaches
every broker). Writes are conditional on the znode version the cache holds; a lost race
re-reads the znode and applies the change again, up to ``MAX_UPDATE_RETRIES`` times, as
Kafka's ``updateResourceAcls``. The writing broker updates its own cache at once, so an
``kafkalite-acls --add`` followed by a request on the same broker sees the new ACL.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Iterable

from twisted.internet import defer

from kafkalite.coordination.acls import AclZkStore, VersionedAcls
from kafkalite.coordination.errors import ZkVersionConflictError
from kafkalite.coordination.change_notifications import ChangeNotificationListener
from kafkalite.security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, AclMatcher, Operation,
                                    PatternType, ResourcePattern, ResourceType, parse_super_users)
from zk_schema import acls as zacl
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10
#: notifications older than this are deleted by the brokers that process changes (Kafka: 15 min)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class AclAuthorizer:
    """``authorize`` is synchronous over the cache; writes fire when ZooKeeper confirmed them."""

    def __init__(self, store: AclZkStore, *, super_users: str | None, allow_if_no_acl: bool,
                 now_ms: Callable[[], int]) -> None:
        self.store = store
        self.now_ms = now_ms
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.cache: dict[ResourcePattern, VersionedAcls] = {}
        self.matcher = self._matcher()
        self.listeners: list[ChangeNotificationListener] = []

    # -- the cache -----------------------------------------------------------------------------
    def _matcher(self) -> AclMatcher:
        return AclMatcher({p: entries for p, (entries, _v) in self.cache.items() if entries},
                          super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)

    def _set(self, pattern: ResourcePattern, versioned: VersionedAcls) -> None:
        if versioned[1] < 0:
            self.cache.pop(pattern, None)
        else:
            self.cache[pattern] = versioned
        self.matcher = self._matcher()

    @defer.inlineCallbacks
    def start(self) -> Any:
        yield self.store.ensure_paths()
        loaded = yield self.store.load_all()
        self.cache = dict(loaded)
        self.matcher = self._matcher()
        log.info("authorizer: %d ACL resource patterns loaded", len(self.cache))
        for pattern_type in zacl.STORE_ROOTS:
            listener = ChangeNotificationListener(self.store.zk, zacl.change_root(pattern_type), zacl.CHANGE_PREFIX,
                                                  partial(self._apply, pattern_type), what="ACL",
                                                  expiration_ms=CHANGE_EXPIRATION_MS, now_ms=self.now_ms)
            yield listener.start()
            self.listeners.append(listener)

    def stop(self) -> None:
        for listener in self.listeners:
            listener.stop()
        self.listeners = []

    @defer.inlineCallbacks
    def _apply(self, pattern_type: PatternType, notifications: list[bytes]) -> Any:
        for data in notifications:
            try:
                pattern = zacl.decode_change(pattern_type, data)
            except ZkDataError as exc:
                log.warning("ignoring unreadable ACL change notification: %s", exc)
                continue
            if pattern.pattern_type not in zacl.STORE_ROOTS:
                continue
            versioned = yield self.store.read(pattern)
            self._set(pattern, versioned)
            log.info("ACLs of %s: %s", pattern, sorted(str(e) for e in versioned[0]) or "none")

    # -- decisions -----------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        allowed = self.matcher.authorize(principal, host, operation, resource_type, name)
        if not allowed:
            log.debug("Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s",
                      principal, operation.pascal, host, resource_type.pascal, name)
        return allowed

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        return self.matcher.authorized_operations(principal, host, resource_type, name)

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.matcher.bindings(flt)

    # -- writes --------------------------------------------------------------------------------
    @defer.inlineCallbacks
    def _update(self, pattern: ResourcePattern,
                change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]) -> Any:
        """Apply ``change`` to the pattern's entries with a conditional write; fires the entries
        before the change (what a delete reports as removed)."""
        current = self.cache.get(pattern)
        if current is None:
            current = yield self.store.read(pattern)
        for _attempt in range(MAX_UPDATE_RETRIES + 1):
            entries, version = current
            new = change(entries)
            if new == entries:
                self._set(pattern, current)
                return entries
            try:
                new_version = yield self.store.write(pattern, new, version)
            except ZkVersionConflictError:
                current = yield self.store.read(pattern)
                continue
            self._set(pattern, (new, new_version))
            return entries
        log.error("Failed to update ACLs for %s after %d retries", pattern, MAX_UPDATE_RETRIES)
        raise ZkVersionConflictError(zacl.resource_path(pattern), current[1], None)

    @defer.inlineCallbacks
    def create_acls(self, bindings: list[AclBinding]) -> Any:
        """Fires one error message (or None) per binding, in order."""
        results: list[str | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            by_pattern.setdefault(b.pattern, []).append(i)
        for pattern, indexes in by_pattern.items():
            added = frozenset(bindings[i].entry for i in indexes)
            try:
                yield self._update(pattern, added.union)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper failed: every binding of this pattern reports it
                for i in indexes:
                    results[i] = f"Failed to update ACLs for {pattern}: {exc}"
        return results

    @defer.inlineCallbacks
    def delete_acls(self, filters: list[AclBindingFilter]) -> Any:
        """Fires, per filter, the [(binding, error or None)] it deleted (Kafka's AclDeleteResult:
        a binding matched by several filters is reported under the first)."""
        patterns = set(self.cache) | {ResourcePattern(f.resource_type, f.name or "", f.pattern_type)
                                      for f in filters if f.matches_at_most_one()}
        reported: set[AclBinding] = set()
        results: list[list[tuple[AclBinding, str | None]]] = [[] for _ in filters]
        for pattern in sorted(patterns):
            matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
            if not matching:
                continue

            def remove(cur: frozenset[AccessControlEntry],
                       matching: Iterable[tuple[int, AclBindingFilter]] = matching) -> frozenset[AccessControlEntry]:
                return frozenset(e for e in cur if not any(f.matches_entry(e) for _i, f in matching))
            error = None
            try:
                before = yield self._update(pattern, remove)
            except Exception as exc:  # noqa: BLE001 - reported per binding, as Kafka's deleteExceptions
                before = self.cache.get(pattern, (frozenset(), -1))[0]
                error = f"Failed to delete ACLs of {pattern}: {exc}"
            for entry in sorted(before):
                for i, f in matching:
                    if f.matches_entry(entry):
                        binding = AclBinding(pattern, entry)
                        if binding not in reported:
                            reported.add(binding)
                            results[i].append((binding, error))
                        break
        return results
