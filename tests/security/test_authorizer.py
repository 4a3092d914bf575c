"""Kafka's AclAuthorizer rules, the ACL model's filters and names, and the ZooKeeper
codecs: pure, no ZooKeeper."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from strandline.security import acl_znodes
from strandline.security.acl import (
    ANY_BINDING,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strandline.security.authorizer import Authorizer
from strandline.security.principal import KafkaPrincipal, user

TOPIC, GROUP, CLUSTER, TXN = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB, ADMIN = user("alice"), user("bob"), user("admin")
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def acl(
    rt: ResourceType,
    name: str,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    host: str = "*",
    pt: PatternType = LIT,
) -> tuple[ResourcePattern, AccessControlEntry]:
    return ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm)


def authorizer(
    *acls: tuple[ResourcePattern, AccessControlEntry],
    allow_everyone: bool = False,
    super_users: tuple[KafkaPrincipal, ...] = (ADMIN,),
) -> Authorizer:
    auth = Authorizer(super_users, allow_everyone)
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, entry in acls:
        grouped.setdefault(pattern, set()).add(entry)
    for pattern, entries in grouped.items():
        auth.set_acls(pattern, entries)
    return auth


@dataclass(frozen=True)
class Case:
    id: str
    acls: tuple[tuple[ResourcePattern, AccessControlEntry], ...]
    principal: KafkaPrincipal
    op: AclOperation
    rt: ResourceType
    name: str
    expected: bool
    host: str = HOST
    allow_everyone: bool = False


CASES = [
    # -- no ACLs at all for the resource: allow.everyone.if.no.acl.found decides
    Case("no-acl-default-deny", (), ALICE, Op.READ, TOPIC, "orders", False),
    Case("no-acl-allow-everyone", (), ALICE, Op.READ, TOPIC, "orders", True, allow_everyone=True),
    Case(
        "acl-on-other-topic-is-no-acl-here",
        (acl(TOPIC, "payments", "User:bob", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
        allow_everyone=True,
    ),
    Case(
        "any-acl-on-resource-disables-allow-everyone",
        (acl(TOPIC, "orders", "User:bob", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
        allow_everyone=True,
    ),
    Case(
        "wildcard-acl-counts-as-acl",
        (acl(TOPIC, "*", "User:bob", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
        allow_everyone=True,
    ),
    Case(
        "prefixed-acl-counts-as-acl",
        (acl(TOPIC, "ord", "User:bob", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
        allow_everyone=True,
    ),
    Case(
        "acl-of-other-resource-type-is-no-acl",
        (acl(GROUP, "orders", "User:bob", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
        allow_everyone=True,
    ),
    # -- super users
    Case(
        "super-user-despite-deny",
        (acl(TOPIC, "orders", "User:admin", Op.ALL, DENY),),
        ADMIN,
        Op.WRITE,
        TOPIC,
        "orders",
        True,
    ),
    Case("super-user-no-acl", (), ADMIN, Op.ALTER, CLUSTER, "kafka-cluster", True),
    # -- literal allow
    Case(
        "literal-allow",
        (acl(TOPIC, "orders", "User:alice", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "literal-allow-other-op",
        (acl(TOPIC, "orders", "User:alice", Op.READ),),
        ALICE,
        Op.WRITE,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "literal-allow-other-principal",
        (acl(TOPIC, "orders", "User:alice", Op.READ),),
        BOB,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "principal-type-matters",
        (acl(TOPIC, "orders", "Group:alice", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "literal-is-not-a-prefix",
        (acl(TOPIC, "ord", "User:alice", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "allow-all-op",
        (acl(TOPIC, "orders", "User:alice", Op.ALL),),
        ALICE,
        Op.DELETE,
        TOPIC,
        "orders",
        True,
    ),
    # -- hosts
    Case(
        "allow-own-host",
        (acl(TOPIC, "orders", "User:alice", Op.READ, host=HOST),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "allow-other-host-only",
        (acl(TOPIC, "orders", "User:alice", Op.READ, host=OTHER_HOST),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    # -- wildcard principal and resource
    Case(
        "allow-wildcard-principal",
        (acl(TOPIC, "orders", "User:*", Op.READ),),
        BOB,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "allow-wildcard-resource",
        (acl(TOPIC, "*", "User:alice", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "anything",
        True,
    ),
    Case(
        "wildcard-resource-other-type",
        (acl(GROUP, "*", "User:alice", Op.READ),),
        ALICE,
        Op.READ,
        TOPIC,
        "anything",
        False,
    ),
    # -- prefixed
    Case(
        "prefixed-allow",
        (acl(TOPIC, "ord", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "prefixed-equal-name",
        (acl(TOPIC, "orders", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "prefixed-longer-than-name",
        (acl(TOPIC, "orders-eu", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "prefixed-not-a-prefix",
        (acl(TOPIC, "pay", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "prefixed-star-is-literal-text",
        (acl(TOPIC, "*", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    # -- deny wins
    Case(
        "deny-beats-allow",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.READ, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "deny-all-op-beats-allow",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.ALL, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "deny-wildcard-principal",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:*", Op.READ, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "deny-wildcard-host",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.READ, DENY, host="*"),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "deny-own-host",
        (
            acl(TOPIC, "orders", "User:*", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.READ, DENY, host=HOST),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "deny-other-host-does-not-apply",
        (
            acl(TOPIC, "orders", "User:*", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.READ, DENY, host=OTHER_HOST),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "deny-other-principal-does-not-apply",
        (
            acl(TOPIC, "orders", "User:*", Op.READ),
            acl(TOPIC, "orders", "User:bob", Op.READ, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "deny-other-op-does-not-apply",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.WRITE, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "deny-on-wildcard-resource-beats-literal-allow",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "*", "User:alice", Op.READ, DENY),
        ),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "prefixed-deny-beats-literal-allow",
        (
            acl(TOPIC, "orders", "User:alice", Op.WRITE),
            acl(TOPIC, "ord", "User:alice", Op.WRITE, DENY, pt=PRE),
        ),
        ALICE,
        Op.WRITE,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "literal-deny-beats-prefixed-allow",
        (
            acl(TOPIC, "ord", "User:alice", Op.WRITE, pt=PRE),
            acl(TOPIC, "orders", "User:alice", Op.WRITE, DENY),
        ),
        ALICE,
        Op.WRITE,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "only-deny-acls",
        (acl(TOPIC, "orders", "User:bob", Op.READ, DENY),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    # -- implied operations
    *[
        Case(
            f"describe-implied-by-{granted.name.lower()}",
            (acl(TOPIC, "orders", "User:alice", granted),),
            ALICE,
            Op.DESCRIBE,
            TOPIC,
            "orders",
            True,
        )
        for granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL)
    ],
    *[
        Case(
            f"describe-not-implied-by-{granted.name.lower()}",
            (acl(TOPIC, "orders", "User:alice", granted),),
            ALICE,
            Op.DESCRIBE,
            TOPIC,
            "orders",
            False,
        )
        for granted in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    ],
    Case(
        "describe-configs-implied-by-alter-configs",
        (acl(TOPIC, "orders", "User:alice", Op.ALTER_CONFIGS),),
        ALICE,
        Op.DESCRIBE_CONFIGS,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "alter-configs-not-implied-by-describe-configs",
        (acl(TOPIC, "orders", "User:alice", Op.DESCRIBE_CONFIGS),),
        ALICE,
        Op.ALTER_CONFIGS,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "read-not-implied-by-describe",
        (acl(TOPIC, "orders", "User:alice", Op.DESCRIBE),),
        ALICE,
        Op.READ,
        TOPIC,
        "orders",
        False,
    ),
    Case(
        "implied-describe-via-prefixed-and-wildcard-principal",
        (acl(TOPIC, "ord", "User:*", Op.WRITE, pt=PRE),),
        ALICE,
        Op.DESCRIBE,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "deny-read-does-not-deny-describe",
        (
            acl(TOPIC, "orders", "User:alice", Op.DESCRIBE),
            acl(TOPIC, "orders", "User:alice", Op.READ, DENY),
        ),
        ALICE,
        Op.DESCRIBE,
        TOPIC,
        "orders",
        True,
    ),
    Case(
        "deny-describe-beats-implied-describe",
        (
            acl(TOPIC, "orders", "User:alice", Op.READ),
            acl(TOPIC, "orders", "User:alice", Op.DESCRIBE, DENY),
        ),
        ALICE,
        Op.DESCRIBE,
        TOPIC,
        "orders",
        False,
    ),
    # -- other resource types
    Case(
        "cluster-idempotent-write",
        (acl(CLUSTER, "kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE),),
        ALICE,
        Op.IDEMPOTENT_WRITE,
        CLUSTER,
        "kafka-cluster",
        True,
    ),
    Case(
        "group-prefixed-read",
        (acl(GROUP, "team-", "User:alice", Op.READ, pt=PRE),),
        ALICE,
        Op.READ,
        GROUP,
        "team-a",
        True,
    ),
    Case(
        "transactional-id",
        (acl(TXN, "tx-1", "User:alice", Op.WRITE),),
        ALICE,
        Op.WRITE,
        TXN,
        "tx-1",
        True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_authorize(case: Case) -> None:
    auth = authorizer(*case.acls, allow_everyone=case.allow_everyone)
    assert auth.authorize(case.principal, case.host, case.op, case.rt, case.name) is case.expected


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)


def test_many_prefix_lengths_and_updates() -> None:
    auth = authorizer(
        acl(TOPIC, "a", "User:alice", Op.READ, pt=PRE),
        acl(TOPIC, "ab", "User:bob", Op.READ, pt=PRE),
        acl(TOPIC, "abcdef", "User:alice", Op.READ, DENY, pt=PRE),
    )
    assert auth.authorize(ALICE, HOST, Op.READ, TOPIC, "abc")
    assert auth.authorize(BOB, HOST, Op.READ, TOPIC, "abc")
    assert not auth.authorize(ALICE, HOST, Op.READ, TOPIC, "abcdefg")
    assert not auth.authorize(ALICE, HOST, Op.READ, TOPIC, "b")
    # Removing the deny (an empty set) re-allows; removing the last prefix forgets it.
    auth.set_acls(ResourcePattern(TOPIC, "abcdef", PRE), ())
    assert auth.authorize(ALICE, HOST, Op.READ, TOPIC, "abcdefg")
    auth.set_acls(ResourcePattern(TOPIC, "a", PRE), ())
    auth.set_acls(ResourcePattern(TOPIC, "ab", PRE), ())
    assert auth.patterns() == []
    assert not auth.authorize(ALICE, HOST, Op.READ, TOPIC, "abc")


def test_replace_all_and_entries() -> None:
    auth = authorizer(acl(TOPIC, "old", "User:alice", Op.READ))
    pattern, entry = acl(TOPIC, "new", "User:alice", Op.READ)
    auth.replace_all({pattern: {entry}, ResourcePattern(TOPIC, "empty"): set()})
    assert auth.patterns() == [pattern]
    assert auth.entries(pattern) == {entry}
    assert not auth.authorize(ALICE, HOST, Op.READ, TOPIC, "old")
    assert auth.authorize(ALICE, HOST, Op.READ, TOPIC, "new")


# --- authorize_any (Kafka's authorizeByResourceType) -----------------------------------

W = Op.WRITE
ANY_CASES: list[tuple[str, tuple[tuple[ResourcePattern, AccessControlEntry], ...], bool, bool]] = [
    ("nothing", (), False, False),
    ("nothing-allow-everyone", (), True, True),
    ("literal-allow", (acl(TOPIC, "orders", "User:alice", W),), False, True),
    ("prefixed-allow", (acl(TOPIC, "ord", "User:alice", W, pt=PRE),), False, True),
    ("wildcard-principal", (acl(TOPIC, "orders", "User:*", W),), False, True),
    ("all-op", (acl(TOPIC, "orders", "User:alice", Op.ALL),), False, True),
    ("other-op", (acl(TOPIC, "orders", "User:alice", Op.READ),), False, False),
    ("other-type", (acl(GROUP, "orders", "User:alice", W),), False, False),
    ("other-host", (acl(TOPIC, "o", "User:alice", W, host=OTHER_HOST),), False, False),
    (
        "deny-star-wins-even-with-allow-everyone",
        (acl(TOPIC, "*", "User:alice", W, DENY),),
        True,
        False,
    ),
    (
        "other-deny-with-allow-everyone",
        (acl(TOPIC, "orders", "User:alice", W, DENY),),
        True,
        True,
    ),
    (
        "literal-denied-literal",
        (acl(TOPIC, "orders", "User:alice", W), acl(TOPIC, "orders", "User:alice", W, DENY)),
        False,
        False,
    ),
    (
        "literal-denied-by-prefix",
        (
            acl(TOPIC, "orders", "User:alice", W),
            acl(TOPIC, "or", "User:alice", W, DENY, pt=PRE),
        ),
        False,
        False,
    ),
    (
        "one-literal-survives",
        (
            acl(TOPIC, "orders", "User:alice", W),
            acl(TOPIC, "payments", "User:alice", W),
            acl(TOPIC, "or", "User:alice", W, DENY, pt=PRE),
        ),
        False,
        True,
    ),
    (
        "prefix-denied-by-shorter-prefix",
        (
            acl(TOPIC, "orders", "User:alice", W, pt=PRE),
            acl(TOPIC, "ord", "User:alice", W, DENY, pt=PRE),
        ),
        False,
        False,
    ),
    (
        "prefix-not-denied-by-longer-prefix",
        (
            acl(TOPIC, "ord", "User:alice", W, pt=PRE),
            acl(TOPIC, "orders", "User:alice", W, DENY, pt=PRE),
        ),
        False,
        True,
    ),
    (
        "wildcard-literal-allow-survives-literal-deny",
        (acl(TOPIC, "*", "User:alice", W), acl(TOPIC, "orders", "User:alice", W, DENY)),
        False,
        True,
    ),
]


@pytest.mark.parametrize(
    ("acls", "allow_everyone", "expected"),
    [c[1:] for c in ANY_CASES],
    ids=[c[0] for c in ANY_CASES],
)
def test_authorize_any(
    acls: tuple[tuple[ResourcePattern, AccessControlEntry], ...],
    allow_everyone: bool,
    expected: bool,
) -> None:
    """May alice WRITE some topic?"""
    auth = authorizer(*acls, allow_everyone=allow_everyone)
    assert auth.authorize_any(ALICE, HOST, W, TOPIC) is expected


def test_authorize_any_super_user_implied_ops_and_bad_arguments() -> None:
    # Unlike authorize, READ does not imply DESCRIBE here (Kafka's behaviour too).
    reader = authorizer(acl(TOPIC, "orders", "User:alice", Op.READ))
    assert reader.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "orders")
    assert not reader.authorize_any(ALICE, HOST, Op.DESCRIBE, TOPIC)
    auth = authorizer(acl(TOPIC, "*", "User:admin", Op.WRITE, DENY))
    assert auth.authorize_any(ADMIN, HOST, Op.WRITE, TOPIC)
    with pytest.raises(ValueError):
        auth.authorize_any(ALICE, HOST, Op.ANY, TOPIC)
    with pytest.raises(ValueError):
        auth.authorize_any(ALICE, HOST, Op.WRITE, ResourceType.ANY)


def test_idempotent_producer_rule() -> None:
    """KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic."""
    on_cluster = authorizer(acl(CLUSTER, "kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE))
    on_topic = authorizer(acl(TOPIC, "orders", "User:alice", Op.WRITE))

    def may(auth: Authorizer) -> bool:
        return auth.authorize(
            ALICE, HOST, Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster"
        ) or auth.authorize_any(ALICE, HOST, Op.WRITE, TOPIC)

    assert may(on_cluster) and may(on_topic)
    assert not may(authorizer(acl(TOPIC, "orders", "User:alice", Op.READ)))


# --- configuration -------------------------------------------------------------------


def test_from_config() -> None:
    assert Authorizer.from_config({}) is None
    assert Authorizer.from_config({"authorizer.class.name": " "}) is None
    auth = Authorizer.from_config(
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin; User:CN=broker,O=x ;",
            "allow.everyone.if.no.acl.found": "TRUE",
        }
    )
    assert auth is not None
    assert auth.super_users == {ADMIN, KafkaPrincipal("User", "CN=broker,O=x")}
    assert auth.allow_everyone_if_no_acl_found
    legacy = Authorizer.from_config(
        {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"}
    )
    assert legacy is not None and not legacy.allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="authorizer.class.name"):
        Authorizer.from_config({"authorizer.class.name": "com.example.Custom"})
    with pytest.raises(ValueError, match="allow.everyone"):
        Authorizer.from_config(
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "yes",
            }
        )


# --- filters (ANY / MATCH) -----------------------------------------------------------

LIT_ORDERS = ResourcePattern(TOPIC, "orders", LIT)
LIT_STAR = ResourcePattern(TOPIC, "*", LIT)
PRE_ORD = ResourcePattern(TOPIC, "ord", PRE)
PRE_ORDERS = ResourcePattern(TOPIC, "orders", PRE)
PRE_PAY = ResourcePattern(TOPIC, "pay", PRE)
LIT_OTHER = ResourcePattern(TOPIC, "other", LIT)
GROUP_ORDERS = ResourcePattern(GROUP, "orders", LIT)
ALL_PATTERNS = [LIT_ORDERS, LIT_STAR, PRE_ORD, PRE_ORDERS, PRE_PAY, LIT_OTHER, GROUP_ORDERS]


@pytest.mark.parametrize(
    ("pattern_filter", "expected"),
    [
        (ResourcePatternFilter(TOPIC, "orders", LIT), {LIT_ORDERS}),
        (ResourcePatternFilter(TOPIC, "orders", PRE), {PRE_ORDERS}),
        (ResourcePatternFilter(TOPIC, "orders", PatternType.ANY), {LIT_ORDERS, PRE_ORDERS}),
        (
            ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH),
            {LIT_ORDERS, LIT_STAR, PRE_ORD, PRE_ORDERS},
        ),
        (ResourcePatternFilter(TOPIC, "*", PatternType.MATCH), {LIT_STAR}),
        (ResourcePatternFilter(TOPIC, None, PatternType.MATCH), set(ALL_PATTERNS) - {GROUP_ORDERS}),
        (ResourcePatternFilter(TOPIC, None, PRE), {PRE_ORD, PRE_ORDERS, PRE_PAY}),
        (ResourcePatternFilter(ResourceType.ANY, "orders", LIT), {LIT_ORDERS, GROUP_ORDERS}),
        (ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), set(ALL_PATTERNS)),
    ],
    # The filter names the case; a set's repr changes order from run to run, and xdist
    # needs every worker to collect the same ids.
    ids=lambda value: str(value) if isinstance(value, ResourcePatternFilter) else "",
)
def test_resource_pattern_filter(
    pattern_filter: ResourcePatternFilter, expected: set[ResourcePattern]
) -> None:
    assert {p for p in ALL_PATTERNS if pattern_filter.matches(p)} == expected


def test_entry_filter_and_binding_filter() -> None:
    entry = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
    assert AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY).matches(entry)
    assert AccessControlEntryFilter("User:alice", "*", Op.READ, ALLOW).matches(entry)
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, AclPermissionType.ANY).matches(
        entry
    )
    assert not AccessControlEntryFilter(None, "10.0.0.1", Op.ANY, AclPermissionType.ANY).matches(
        entry
    )
    # A filter's ALL is the ALL operation, not "any": it does not match READ.
    assert not AccessControlEntryFilter(None, None, Op.ALL, AclPermissionType.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, Op.ANY, DENY).matches(entry)
    binding = AclBinding(LIT_ORDERS, entry)
    assert ANY_BINDING.matches(binding)
    assert binding.to_filter().matches(binding)
    assert binding.to_filter().matches_at_most_one
    assert not ANY_BINDING.matches_at_most_one
    assert ANY_BINDING.find_indefinite_field() == "Resource type is ANY."


def test_authorizer_acls_filter() -> None:
    auth = authorizer(
        acl(TOPIC, "orders", "User:alice", Op.READ),
        acl(TOPIC, "ord", "User:bob", Op.WRITE, pt=PRE),
        acl(GROUP, "g", "User:alice", Op.READ),
    )
    everything = auth.acls()
    assert len(everything) == 3
    match = AclBindingFilter(
        ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH),
        AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY),
    )
    assert {b.pattern for b in auth.acls(match)} == {LIT_ORDERS, PRE_ORD}
    alice = AclBindingFilter(
        ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
        AccessControlEntryFilter("User:alice", None, Op.ANY, AclPermissionType.ANY),
    )
    assert [str(b.pattern.name) for b in auth.acls(alice)] == ["orders", "g"]


def test_model_refuses_filter_only_values() -> None:
    with pytest.raises(ValueError):
        ResourcePattern(ResourceType.ANY, "x", LIT)
    with pytest.raises(ValueError):
        ResourcePattern(TOPIC, "x", PatternType.MATCH)
    with pytest.raises(ValueError):
        AccessControlEntry("User:a", "*", Op.ANY, ALLOW)
    with pytest.raises(ValueError):
        AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY)


# --- names and codes -----------------------------------------------------------------


def test_wire_codes() -> None:
    assert [int(t) for t in ResourceType] == list(range(8))
    assert (ResourceType.CLUSTER, ResourceType.USER) == (4, 7)
    assert (PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (2, 3, 4)
    assert (Op.ALL, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (2, 12, 14)
    assert (AclPermissionType.ANY, DENY, ALLOW) == (1, 2, 3)
    assert AclOperation.from_code(99) == Op.UNKNOWN
    assert PatternType.from_code(4) == PRE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Read", Op.READ),
        ("READ", Op.READ),
        ("read", Op.READ),
        ("DescribeConfigs", Op.DESCRIBE_CONFIGS),
        ("DESCRIBE_CONFIGS", Op.DESCRIBE_CONFIGS),
        ("IdempotentWrite", Op.IDEMPOTENT_WRITE),
        ("All", Op.ALL),
        ("Fly", Op.UNKNOWN),
    ],
)
def test_operation_names(text: str, expected: AclOperation) -> None:
    assert AclOperation.from_name(text) == expected


def test_pascal_names_and_kafka_strings() -> None:
    assert ResourceType.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert ResourceType.from_name("TransactionalId") == TXN
    assert ResourceType.from_name("Topic") == TOPIC
    assert PatternType.from_name("prefixed") == PRE
    assert AclPermissionType.from_name("Allow") == ALLOW
    assert Op.CLUSTER_ACTION.pascal_name == "ClusterAction"
    assert (
        str(LIT_ORDERS) == "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    )
    entry = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
    assert str(entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert (
        str(ResourcePatternFilter(TOPIC, None, PatternType.ANY))
        == "ResourcePattern(resourceType=TOPIC, name=<any>, patternType=ANY)"
    )


# --- ZooKeeper codecs ----------------------------------------------------------------


def test_acl_znode_layout_and_json() -> None:
    assert acl_znodes.resource_path(LIT_ORDERS) == "/kafka-acl/Topic/orders"
    assert acl_znodes.resource_path(PRE_ORD) == "/kafka-acl-extended/prefixed/Topic/ord"
    cluster = ResourcePattern(CLUSTER, "kafka-cluster")
    assert acl_znodes.resource_path(cluster) == "/kafka-acl/Cluster/kafka-cluster"
    txn = ResourcePattern(TXN, "tx", PRE)
    assert acl_znodes.resource_path(txn) == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    entries = {
        AccessControlEntry("User:alice", "*", Op.READ, ALLOW),
        AccessControlEntry("User:bob", "10.0.0.1", Op.DESCRIBE_CONFIGS, DENY),
    }
    data = acl_znodes.encode_acls(entries)
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
            {
                "principal": "User:bob",
                "permissionType": "Deny",
                "operation": "DescribeConfigs",
                "host": "10.0.0.1",
            },
        ],
    }
    assert acl_znodes.decode_acls(data) == entries
    assert acl_znodes.decode_acls(b"") == frozenset()
    # What Kafka itself writes (HashMap order, spaces) decodes the same.
    kafka = (
        b'{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow",'
        b'"operation": "IdempotentWrite","principal": "User:alice"}]}'
    )
    assert acl_znodes.decode_acls(kafka) == {
        AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, ALLOW)
    }


def test_acl_change_codecs() -> None:
    literal = acl_znodes.encode_acl_change(LIT_ORDERS)
    assert literal == b"TOPIC:orders"
    assert acl_znodes.decode_acl_change("/kafka-acl-changes", literal) == LIT_ORDERS
    # Pre-2.4 brokers wrote the Pascal name; names may contain ':'.
    assert acl_znodes.decode_acl_change("/kafka-acl-changes", b"Topic:a:b") == ResourcePattern(
        TOPIC, "a:b"
    )
    assert acl_znodes.decode_acl_change(
        "/kafka-acl-changes", b"TRANSACTIONAL_ID:tx"
    ) == ResourcePattern(TXN, "tx")
    extended = acl_znodes.encode_acl_change(PRE_ORD)
    assert json.loads(extended) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    assert acl_znodes.decode_acl_change("/kafka-acl-extended-changes", extended) == PRE_ORD
    assert acl_znodes.change_path(LIT) == "/kafka-acl-changes"
    assert acl_znodes.change_path(PRE) == "/kafka-acl-extended-changes"
    assert acl_znodes.change_sequence("acl_changes_0000000042") == 42
    assert acl_znodes.change_sequence("other") == -1


# --- kafka-acls flags (the CLI's pure part) ----------------------------------------------


def test_acls_tool_plans_like_kafka_acls() -> None:
    from strandline.cli.acls import Flags, plan

    added = plan(
        Flags(
            add=True,
            allow_principals=["User:alice", "User:bob"],
            deny_principals=["User:eve"],
            deny_hosts=["10.0.0.9"],
            operations=["Read", "DESCRIBE"],
            topics=["orders"],
            pattern_type="prefixed",
        )
    )
    ((pattern_filter, entries),) = added.acls.items()
    assert pattern_filter == ResourcePatternFilter(TOPIC, "orders", PRE)
    assert entries == {
        AccessControlEntry(p, "*", op, ALLOW)
        for p in ("User:alice", "User:bob")
        for op in (Op.READ, Op.DESCRIBE)
    } | {AccessControlEntry("User:eve", "10.0.0.9", op, DENY) for op in (Op.READ, Op.DESCRIBE)}
    # No --operation means All; --cluster is the kafka-cluster literal.
    cluster = plan(Flags(add=True, allow_principals=["User:a"], cluster=True))
    assert cluster.acls == {
        ResourcePatternFilter(CLUSTER, "kafka-cluster", LIT): {
            AccessControlEntry("User:a", "*", Op.ALL, ALLOW)
        }
    }
    roles = plan(
        Flags(
            add=True,
            producer=True,
            consumer=True,
            idempotent=True,
            allow_principals=["User:app"],
            topics=["t"],
            groups=["g"],
        )
    )
    ops = {f.resource_type: {e.operation for e in es} for f, es in roles.acls.items()}
    assert ops == {
        TOPIC: {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ},
        GROUP: {Op.READ},
        CLUSTER: {Op.IDEMPOTENT_WRITE},
    }
    removed = plan(Flags(remove=True, topics=["orders"], pattern_type="match"))
    assert removed.acls == {ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH): frozenset()}
    listed = plan(Flags(list_=True, list_principals=["User:alice"]))
    assert listed.acls == {} and listed.list_principals == ("User:alice",)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ({}, "exactly one action"),
        ({"add": True, "list_": True}, "exactly one action"),
        ({"add": True, "topics": ["t"]}, "--allow-principal, --deny-principal"),
        ({"add": True, "allow_principals": ["User:a"]}, "at least one resource"),
        ({"add": True, "allow_principals": ["alice"], "topics": ["t"]}, "Type:name"),
        (
            {"add": True, "allow_principals": ["User:a"], "topics": ["t"], "operations": ["Fly"]},
            "unknown operation 'Fly'",
        ),
        (
            {
                "add": True,
                "allow_principals": ["User:a"],
                "groups": ["g"],
                "operations": ["Write"],
            },
            "ResourceType Group only supports operations",
        ),
        (
            {"add": True, "allow_principals": ["User:a"], "topics": ["t"], "pattern_type": "any"},
            "not valid when adding acls",
        ),
        ({"list_": True, "pattern_type": "fuzzy"}, "--resource-pattern-type"),
        ({"list_": True, "allow_principals": ["User:a"]}, "cannot be used with --list"),
        (
            {"remove": True, "topics": ["t"], "list_principals": ["User:a"]},
            "only available if --list",
        ),
        ({"add": True, "producer": True}, "With --producer you must specify a --topic"),
        (
            {"add": True, "producer": True, "topics": ["t"], "operations": ["Read"]},
            "--operation cannot be used with --producer",
        ),
        ({"add": True, "idempotent": True, "topics": ["t"]}, "only available if --producer"),
        ({"add": True, "consumer": True, "topics": ["t"]}, "With --consumer"),
    ],
)
def test_acls_tool_refuses_bad_combinations(flags: dict[str, object], says: str) -> None:
    from strandline.cli.acls import AclToolError, Flags, plan

    with pytest.raises(AclToolError, match=re.escape(says)):
        plan(Flags(**flags))  # type: ignore[arg-type]
