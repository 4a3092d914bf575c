"""ACLs in ZooKeeper, as Kafka's ZkAclStore keeps them (layout in `acl_znodes`).

One znode per resource pattern holding its entries, written read-modify-write
conditionally on the zkVersion so concurrent writers never lose each other's entries;
each real change announced under a change directory, which every broker's `AclCache`
watches.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from strandline.coordination.errors import ZkVersionConflictError
from strandline.coordination.zk_client import ZkClient
from strandline.security import acl_znodes
from strandline.security.acl import AccessControlEntry, ResourcePattern, ResourceType


class ZkAclStore:
    """The ACL znodes, read and written through one `ZkClient`."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    # Conditional ACL writes retried after losing a race, before giving up (Kafka: 10,
    # but its brokers also serialise their own writers; tools here do not).
    ACL_UPDATE_ATTEMPTS = 30

    def create_acl_paths(self) -> None:
        """The ACL roots and change directories, as Kafka's createAclPaths."""
        for path in acl_znodes.ACL_PATHS:
            self.zk.kazoo.ensure_path(path)

    def get_acls(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """(entries, zkVersion) of one resource pattern; (empty, -1) without a znode."""
        try:
            data, stat = self.zk.kazoo.get(acl_znodes.resource_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return acl_znodes.decode_acls(data), int(stat.version)

    def get_all_acls(
        self, patterns: Iterable[ResourcePattern] | None = None
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Entries of `patterns` (default: every stored pattern), pipelined reads; a
        pattern without a znode (or with no entries) is left out."""
        wanted = self.list_acl_patterns() if patterns is None else list(patterns)
        pending = [(p, self.zk.kazoo.get_async(acl_znodes.resource_path(p))) for p in wanted]
        found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            entries = acl_znodes.decode_acls(data)
            if entries:
                found[pattern] = entries
        return found

    def list_acl_patterns(self) -> list[ResourcePattern]:
        """Every resource pattern with a znode; unknown resource-type directories are
        ignored, as Kafka's loadAllAcls does."""
        patterns: list[ResourcePattern] = []
        for pattern_type in acl_znodes.STORED_PATTERN_TYPES:
            root = acl_znodes.store_path(pattern_type)
            try:
                type_names = self.zk.kazoo.get_children(root)
            except NoNodeError:
                continue
            for type_name in sorted(type_names):
                resource_type = ResourceType.from_name(type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    continue
                try:
                    names = self.zk.kazoo.get_children(f"{root}/{type_name}")
                except NoNodeError:
                    continue
                patterns.extend(
                    ResourcePattern(resource_type, name, pattern_type) for name in sorted(names)
                )
        return patterns

    def add_acls(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]
    ) -> frozenset[AccessControlEntry]:
        """Add entries to the pattern's; returns its entries after the write."""
        added = frozenset(entries)
        return self.update_acls(pattern, lambda current: current | added)[1]

    def remove_acls(
        self, pattern: ResourcePattern, which: Callable[[AccessControlEntry], bool]
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Remove the entries `which` selects: (the entries removed, those remaining)."""
        before, after = self.update_acls(
            pattern, lambda current: frozenset(e for e in current if not which(e))
        )
        return before - after, after

    def update_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Read-modify-write of one pattern's znode, conditional on the zkVersion read
        (create if absent, delete when emptied), so concurrent writers never lose each
        other's entries: the loser rereads and reapplies `change`. A real change is
        announced under the change directory. Returns (before, after) of the write
        that took effect."""
        path = acl_znodes.resource_path(pattern)
        for _attempt in range(self.ACL_UPDATE_ATTEMPTS):
            current, version = self.get_acls(pattern)
            updated = frozenset(change(current))
            if updated == current:
                return current, current
            try:
                if not updated:
                    self.zk.kazoo.delete(path, version=version)
                elif version < 0:
                    self.zk.kazoo.create(path, acl_znodes.encode_acls(updated), makepath=True)
                else:
                    self.zk.kazoo.set(path, acl_znodes.encode_acls(updated), version=version)
            except (BadVersionError, NoNodeError, NodeExistsError):
                # Jittered, so racing writers do not collide again in lockstep.
                time.sleep(random.uniform(0.005, 0.05))
                continue
            self.create_acl_change_notification(pattern)
            return current, updated
        raise ZkVersionConflictError(
            path, None, f"still contended after {self.ACL_UPDATE_ATTEMPTS} attempts"
        )

    def create_acl_change_notification(self, pattern: ResourcePattern) -> str:
        """Persistent sequential acl_changes_<seq>; returns its name."""
        created: str = self.zk.kazoo.create(
            f"{acl_znodes.change_path(pattern.pattern_type)}/{acl_znodes.ACL_CHANGE_PREFIX}",
            acl_znodes.encode_acl_change(pattern),
            sequence=True,
            makepath=True,
        )
        return created.rsplit("/", 1)[1]

    def get_acl_change_notifications(
        self, change_dir: str, after_sequence: int = -1
    ) -> list[acl_znodes.AclChangeNotification]:
        """The notifications under `change_dir` (one of acl_znodes.ACL_CHANGE_PATHS) with
        a sequence number above `after_sequence`, oldest first."""
        try:
            children = self.zk.kazoo.get_children(change_dir)
        except NoNodeError:
            return []
        numbered = sorted(
            (seq, child)
            for child in children
            if (seq := acl_znodes.change_sequence(child)) > after_sequence
        )
        pending = [
            (seq, child, self.zk.kazoo.get_async(f"{change_dir}/{child}"))
            for seq, child in numbered
        ]
        notifications = []
        for seq, child, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue  # purged meanwhile
            try:
                pattern: ResourcePattern | None = acl_znodes.decode_acl_change(change_dir, data)
            except (ValueError, KeyError, TypeError):
                pattern = None
            notifications.append(
                acl_znodes.AclChangeNotification(child, seq, pattern, int(stat.ctime))
            )
        return notifications

    def delete_acl_change_notifications(self, change_dir: str, names: Iterable[str]) -> None:
        for name in names:
            self.zk.delete_quietly(f"{change_dir}/{name}")
