"""The broker's view of ZooKeeper's ACLs, fed into its Authorizer (the ZooKeeper half
of Kafka's AclAuthorizer).

`start()` loads every binding; afterwards each change notification under
/kafka-acl-changes or /kafka-acl-extended-changes makes the named resource be reread
(Kafka's ZkNodeChangeNotificationListener: notifications are processed in sequence
order once each, and any broker deletes those older than 15 minutes). The ACL admin
APIs write through `create_acls` / `delete_acls`, which also update the local
Authorizer at once so a client reads its own writes from the broker it wrote to.

Thread-safe: one lock serialises reloads and writes, so a reload that read an older
znode can never be applied after a newer local write (Kafka's `lock synchronized`).
All methods block on ZooKeeper: call them from a thread (`asyncio.to_thread`), or from
kazoo's watch thread, never on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zk_retry import until_connected
from strandline.security import acl_znodes
from strandline.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from strandline.security.acl_store import ZkAclStore
from strandline.security.authorizer import Authorizer

log = logging.getLogger(__name__)

# Kafka's ZkNodeChangeNotificationListener changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

DeleteResult = list[tuple[AclBinding, Exception | None]]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _patterns_of(pattern_filter: ResourcePatternFilter) -> set[ResourcePattern]:
    """The patterns an exact filter names (Kafka's filterToResources), so a delete also
    reaches a pattern this broker has not heard of yet."""
    if not pattern_filter.matches_at_most_one or pattern_filter.name is None:
        return set()
    if pattern_filter.pattern_type == PatternType.ANY:
        types = [PatternType.LITERAL, PatternType.PREFIXED]
    else:
        types = [pattern_filter.pattern_type]
    return {ResourcePattern(pattern_filter.resource_type, pattern_filter.name, t) for t in types}


class AclCache:
    def __init__(
        self,
        zk: ZkClient,
        authorizer: Authorizer,
        now_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.zk = zk
        self.store = ZkAclStore(zk)
        self.authorizer = authorizer
        self.now_ms = now_ms
        self._lock = threading.RLock()
        # Per change directory: the last sequence number applied, and the notifications
        # seen (name -> ZooKeeper ctime) until they expire and are deleted.
        self._applied: dict[str, int] = {d: -1 for d in acl_znodes.ACL_CHANGE_PATHS}
        self._seen: dict[str, dict[str, int]] = {d: {} for d in acl_znodes.ACL_CHANGE_PATHS}
        self._watches: list[Any] = []
        self._closed = False

    # --- loading and notifications -------------------------------------------------

    def start(self, watch: bool = True) -> None:
        """Load every ACL into the authorizer; with `watch`, also watch both change
        directories (callbacks on kazoo's thread call `process_changes`).

        The notifications present before the load are marked applied: the load already
        reflects them, and any write after their listing announces itself with a higher
        sequence number, which the watch (firing once when set) then applies.
        """
        with self._lock:
            self.store.create_acl_paths()
            marks: dict[str, int] = {}
            for change_dir in acl_znodes.ACL_CHANGE_PATHS:
                notes = self.store.get_acl_change_notifications(change_dir)
                marks[change_dir] = max((n.sequence for n in notes), default=-1)
                self._seen[change_dir].update({n.name: n.ctime_ms for n in notes})
            self.authorizer.replace_all(self.store.get_all_acls())
            self._applied.update(marks)
            self._purge()
        if watch and not self._watches:
            for change_dir in acl_znodes.ACL_CHANGE_PATHS:
                self._watches.append(self.zk.watch_children(change_dir, self._on_children))

    def _on_children(self, _children: list[str]) -> None:
        if self._closed:
            return
        try:
            self.process_changes()
        except Exception:  # noqa: BLE001 - kazoo would drop the watch; retried next change
            log.exception("processing ACL change notifications failed; will retry")

    def process_changes(self) -> int:
        """Apply the notifications not applied yet (both directories): reread each
        named resource from ZooKeeper into the authorizer. Returns how many resources
        were reloaded. On a ZooKeeper error nothing is marked applied, so the next call
        retries."""
        with self._lock:
            changed: set[ResourcePattern] = set()
            marks = dict(self._applied)
            seen: dict[str, dict[str, int]] = {d: {} for d in acl_znodes.ACL_CHANGE_PATHS}
            for change_dir in acl_znodes.ACL_CHANGE_PATHS:
                for note in self.store.get_acl_change_notifications(change_dir, marks[change_dir]):
                    if note.pattern is None:
                        log.warning("ignoring undecodable ACL change %s/%s", change_dir, note.name)
                    else:
                        changed.add(note.pattern)
                    marks[change_dir] = max(marks[change_dir], note.sequence)
                    seen[change_dir][note.name] = note.ctime_ms
            if changed:
                fresh = self.store.get_all_acls(changed)
                for pattern in changed:
                    self.authorizer.set_acls(pattern, fresh.get(pattern, frozenset()))
            self._applied = marks
            for change_dir, names in seen.items():
                self._seen[change_dir].update(names)
            self._purge()
            return len(changed)

    def _purge(self) -> None:
        cutoff = self.now_ms() - CHANGE_EXPIRATION_MS
        for change_dir, seen in self._seen.items():
            expired = [name for name, ctime in seen.items() if ctime < cutoff]
            if expired:
                self.store.delete_acl_change_notifications(change_dir, expired)
                for name in expired:
                    del seen[name]

    def close(self) -> None:
        """Stop reacting to notifications (the watches stay set but become inert)."""
        self._closed = True

    # --- writes (the ACL admin APIs) -----------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Kafka's AclAuthorizer.createAcls for bindings already validated: one
        conditional write per resource pattern. Per binding: None or the error of its
        pattern's write."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            by_pattern.setdefault(binding.pattern, []).append(i)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                entries = [bindings[i].entry for i in indexes]
                try:
                    after = until_connected(self.store.add_acls, pattern, entries)
                except Exception as e:  # noqa: BLE001 - reported per binding
                    for i in indexes:
                        results[i] = e
                    continue
                self.authorizer.set_acls(pattern, after)
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        """Kafka's AclAuthorizer.deleteAcls: every stored pattern some filter's pattern
        filter matches loses the entries some of those filters' entry filter matches.
        Per filter: the bindings deleted on its account (a binding matched by several
        filters counts for the first), each with None or the error of its write."""
        results: list[DeleteResult] = [[] for _ in filters]
        with self._lock:
            candidates: set[ResourcePattern] = set()
            if not all(f.pattern_filter.matches_at_most_one for f in filters):
                # Read the store itself, not this broker's cache, so an ACL written
                # through another broker a moment ago is deleted too.
                candidates.update(until_connected(self.store.list_acl_patterns))
                candidates.update(self.authorizer.patterns())
            for f in filters:
                candidates |= _patterns_of(f.pattern_filter)
            for pattern in sorted(candidates, key=_pattern_order):
                matching = [
                    (i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)
                ]
                if not matching:
                    continue

                def first_filter(entry: AccessControlEntry) -> int | None:
                    for i, f in matching:  # noqa: B023 - used before the loop moves on
                        if f.entry_filter.matches(entry):
                            return i
                    return None

                try:
                    removed, after = until_connected(
                        self.store.remove_acls, pattern, lambda e: first_filter(e) is not None
                    )
                except Exception as e:  # noqa: BLE001 - reported per binding
                    for entry in sorted(self.authorizer.entries(pattern), key=_entry_order):
                        i = first_filter(entry)
                        if i is not None:
                            results[i].append((AclBinding(pattern, entry), e))
                    continue
                self.authorizer.set_acls(pattern, after)
                for entry in sorted(removed, key=_entry_order):
                    i = first_filter(entry)
                    assert i is not None
                    results[i].append((AclBinding(pattern, entry), None))
        return results


def _pattern_order(p: ResourcePattern) -> tuple[int, int, str]:
    return (p.resource_type, p.pattern_type, p.name)


def _entry_order(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, e.operation, e.permission_type)


# A broker that set an authorizer but no AclCache on its context still gets working
# ACL admin APIs: one write-through cache per authorizer (no notifications applied).
_fallback: weakref.WeakKeyDictionary[Authorizer, AclCache] = weakref.WeakKeyDictionary()
_fallback_lock = threading.Lock()


def write_through(zk: ZkClient, authorizer: Authorizer) -> AclCache:
    with _fallback_lock:
        cache = _fallback.get(authorizer)
        if cache is None:
            cache = _fallback[authorizer] = AclCache(zk, authorizer)
        return cache
