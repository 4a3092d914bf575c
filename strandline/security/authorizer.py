"""Kafka's AclAuthorizer decision rules over an in-memory set of ACL bindings.

Pure: the bindings are handed in (by `strandline.security.acl_cache.AclCache`, from
ZooKeeper) and `authorize` only reads them. The broker calls `authorize` for every
resource of every request, so the bindings are indexed for direct lookups: entries by
(resource type, literal name), prefixed patterns by resource type and prefix length,
and resource names by (entry, resource type, pattern type) for `authorize_any`.

Updates build a new index and swap one reference, so readers on any thread see either
the old or the new state, never half an update, without taking a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strandline.security.acl import (
    ANY_BINDING,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strandline.security.principal import KafkaPrincipal

AUTHORIZER_CLASS_NAME = "authorizer.class.name"
SUPER_USERS = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND = "allow.everyone.if.no.acl.found"

# The class names Kafka's ZooKeeper-era brokers are configured with; any of them turns
# on this authorizer (same ZooKeeper store, same rules).
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "strandline.security.authorizer.Authorizer",
    }
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALL = AclOperation.ALL

# An ALLOW for any of these grants the operation (AclOperation's documented inheritance:
# READ, WRITE, DELETE or ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
# DENY is never implied: denying READ does not deny DESCRIBE.
_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        ALL,
    ),
    AclOperation.DESCRIBE_CONFIGS: (
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        ALL,
    ),
}

# (principal, host, operation, permission type): an entry as a hashable lookup key.
_Key = tuple[str, str, AclOperation, AclPermissionType]
_TypeKey = tuple[_Key, ResourceType, PatternType]
_EMPTY: frozenset[AccessControlEntry] = frozenset()


def _key(entry: AccessControlEntry) -> _Key:
    return (entry.principal, entry.host, entry.operation, entry.permission_type)


@dataclass(frozen=True)
class _Prefixes:
    """One resource type's prefixed patterns: the distinct prefix lengths (ascending) so
    a name is checked with one dict lookup per length, not one per pattern."""

    lengths: tuple[int, ...]
    entries: Mapping[str, frozenset[_Key]]


@dataclass(frozen=True)
class _Index:
    acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]
    literal: Mapping[tuple[ResourceType, str], frozenset[_Key]]
    prefixed: Mapping[ResourceType, _Prefixes]
    # Kafka's resourceCache: which resource names an entry is granted/denied on.
    by_type: Mapping[_TypeKey, frozenset[str]]


def _prefixes(entries: Mapping[str, frozenset[_Key]]) -> _Prefixes:
    return _Prefixes(tuple(sorted({len(name) for name in entries})), entries)


def _build(acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> _Index:
    literal: dict[tuple[ResourceType, str], frozenset[_Key]] = {}
    prefixed: dict[ResourceType, dict[str, frozenset[_Key]]] = {}
    by_type: dict[_TypeKey, set[str]] = {}
    for pattern, entries in acls.items():
        keys = frozenset(_key(e) for e in entries)
        if pattern.pattern_type == PatternType.LITERAL:
            literal[(pattern.resource_type, pattern.name)] = keys
        elif pattern.pattern_type == PatternType.PREFIXED:
            prefixed.setdefault(pattern.resource_type, {})[pattern.name] = keys
        else:
            continue
        for key in keys:
            by_type.setdefault((key, pattern.resource_type, pattern.pattern_type), set()).add(
                pattern.name
            )
    return _Index(
        acls=dict(acls),
        literal=literal,
        prefixed={rt: _prefixes(names) for rt, names in prefixed.items()},
        by_type={k: frozenset(v) for k, v in by_type.items()},
    )


def _with(
    index: _Index, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]
) -> _Index:
    """`index` with `pattern`'s entries replaced (empty = removed): copies the top-level
    maps (cheap, in C) and touches only the keys of this one pattern."""
    old = index.acls.get(pattern, _EMPTY)
    if old == entries:
        return index
    acls = dict(index.acls)
    if entries:
        acls[pattern] = entries
    else:
        acls.pop(pattern, None)
    keys = frozenset(_key(e) for e in entries)
    literal, prefixed = index.literal, index.prefixed
    rt, pt = pattern.resource_type, pattern.pattern_type
    if pt == PatternType.LITERAL:
        literal = dict(literal)
        if keys:
            literal[(rt, pattern.name)] = keys
        else:
            literal.pop((rt, pattern.name), None)
    elif pt == PatternType.PREFIXED:
        names = dict(prefixed[rt].entries) if rt in prefixed else {}
        if keys:
            names[pattern.name] = keys
        else:
            names.pop(pattern.name, None)
        prefixed = dict(prefixed)
        if names:
            prefixed[rt] = _prefixes(names)
        else:
            prefixed.pop(rt, None)
    else:
        return _Index(acls, literal, prefixed, index.by_type)
    old_keys = frozenset(_key(e) for e in old)
    by_type = dict(index.by_type)
    for key in old_keys - keys:
        type_key = (key, rt, pt)
        remaining = by_type.get(type_key, frozenset()) - {pattern.name}
        if remaining:
            by_type[type_key] = remaining
        else:
            by_type.pop(type_key, None)
    for key in keys - old_keys:
        type_key = (key, rt, pt)
        by_type[type_key] = by_type.get(type_key, frozenset()) | {pattern.name}
    return _Index(acls, literal, prefixed, by_type)


def parse_super_users(text: str) -> frozenset[KafkaPrincipal]:
    """`super.users`: `User:alice;User:bob` (Kafka separates them with ';')."""
    return frozenset(KafkaPrincipal.parse(p.strip()) for p in text.split(";") if p.strip())


def _parse_bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{key}={text!r}: expected true or false")
    return value == "true"


class Authorizer:
    """Kafka's AclAuthorizer semantics. Thread-safe: updates may come from any thread."""

    def __init__(
        self,
        super_users: Iterable[KafkaPrincipal] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._write_lock = threading.Lock()
        self._index = _build({})

    @classmethod
    def from_config(cls, props: Mapping[str, str]) -> Authorizer | None:
        """The broker's authorizer from server.properties, or None when
        `authorizer.class.name` is empty (Kafka: no authorization at all, and the ACL
        admin APIs answer SECURITY_DISABLED). Raises ValueError for a bad value."""
        class_name = props.get(AUTHORIZER_CLASS_NAME, "").strip()
        if not class_name:
            return None
        if class_name not in AUTHORIZER_CLASS_NAMES:
            raise ValueError(
                f"{AUTHORIZER_CLASS_NAME}={class_name}: only the ZooKeeper ACL authorizer is "
                f"available ({', '.join(sorted(AUTHORIZER_CLASS_NAMES))})"
            )
        return cls(
            parse_super_users(props.get(SUPER_USERS, "")),
            _parse_bool(
                ALLOW_EVERYONE_IF_NO_ACL_FOUND, props.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND, "false")
            ),
        )

    # --- state ---------------------------------------------------------------------

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace one resource pattern's entries (none: the pattern has no ACLs)."""
        with self._write_lock:
            self._index = _with(self._index, pattern, frozenset(entries))

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Every binding at once (a full load)."""
        fresh = {p: frozenset(e) for p, e in acls.items()}
        with self._write_lock:
            self._index = _build({p: e for p, e in fresh.items() if e})

    def patterns(self) -> list[ResourcePattern]:
        """The resource patterns that have ACLs."""
        return list(self._index.acls)

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._index.acls.get(pattern, _EMPTY)

    def acls(self, binding_filter: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        """The bindings the filter matches (Kafka's Authorizer.acls), in a stable order."""
        out: list[AclBinding] = []
        for pattern, entries in self._index.acls.items():
            if not binding_filter.pattern_filter.matches(pattern):
                continue
            out.extend(
                AclBinding(pattern, e) for e in entries if binding_filter.entry_filter.matches(e)
            )
        out.sort(key=_binding_order)
        return out

    # --- decisions -----------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May `principal`, connected from `host`, do `operation` on the named resource?

        Super users may do anything. Otherwise the ACLs that apply are those of the
        literal name, of the `*` literal and of every prefix of the name; with none at all,
        the answer is `allow.everyone.if.no.acl.found`. A matching DENY (the operation or
        ALL; the principal or User:*; the host or *) refuses; else a matching ALLOW (the
        operation, ALL, or one implying it) grants; else refused.
        """
        if principal in self.super_users:
            return True
        index = self._index
        matching: list[frozenset[_Key]] = []
        found = index.literal.get((resource_type, resource_name))
        if found:
            matching.append(found)
        if resource_name != WILDCARD_RESOURCE:
            found = index.literal.get((resource_type, WILDCARD_RESOURCE))
            if found:
                matching.append(found)
        prefixes = index.prefixed.get(resource_type)
        if prefixes is not None:
            for length in prefixes.lengths:
                if length > len(resource_name):
                    break
                found = prefixes.entries.get(resource_name[:length])
                if found:
                    matching.append(found)
        if not matching:
            return self.allow_everyone_if_no_acl_found
        principals = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        for keys in matching:
            for p in principals:
                for h in hosts:
                    if (p, h, operation, DENY) in keys or (p, h, ALL, DENY) in keys:
                        return False
        allowing = _IMPLIED_BY.get(operation, (operation, ALL))
        for keys in matching:
            for p in principals:
                for h in hosts:
                    for op in allowing:
                        if (p, h, op, ALLOW) in keys:
                            return True
        return False

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May `principal` do `operation` on at least one resource of the type (Kafka's
        authorizeByResourceType, KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on
        the cluster *or* WRITE on any topic). Kafka's rules, including their quirks: a
        DENY on the `*` literal refuses at once; then allow.everyone.if.no.acl.found
        allows; then some ALLOW (literal or prefixed) must not be covered by a DENY on the
        same literal or on a prefix of it. Implied operations are not considered."""
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"operation must be specific, not {operation}")
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"resource type must be specific, not {resource_type}")
        if principal in self.super_users:
            return True
        index = self._index
        p = str(principal)

        def names(permission: AclPermissionType, pattern: PatternType) -> list[frozenset[str]]:
            found = []
            for who in {p, WILDCARD_PRINCIPAL}:
                for where in {host, WILDCARD_HOST}:
                    for op in {operation, ALL}:
                        hit = index.by_type.get(
                            ((who, where, op, permission), resource_type, pattern)
                        )
                        if hit:
                            found.append(hit)
            return found

        deny_literals = names(DENY, PatternType.LITERAL)
        if any(WILDCARD_RESOURCE in s for s in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(DENY, PatternType.PREFIXED)
        allow_literals = names(ALLOW, PatternType.LITERAL)
        allow_prefixes = names(ALLOW, PatternType.PREFIXED)
        if not deny_literals and not deny_prefixes:
            return bool(allow_literals or allow_prefixes)

        def dominant_prefixed_deny(name: str) -> bool:
            return any(
                name[:length] in s for length in range(1, len(name) + 1) for s in deny_prefixes
            )

        if any(not dominant_prefixed_deny(prefix) for s in allow_prefixes for prefix in s):
            return True
        return any(
            literal == WILDCARD_RESOURCE
            or (
                not any(literal in s for s in deny_literals) and not dominant_prefixed_deny(literal)
            )
            for s in allow_literals
            for literal in s
        )


def _binding_order(b: AclBinding) -> tuple[int, int, str, str, str, int, int]:
    return (
        b.pattern.resource_type,
        b.pattern.pattern_type,
        b.pattern.name,
        b.entry.principal,
        b.entry.host,
        b.entry.operation,
        b.entry.permission_type,
    )
