"""Kafka's ZooKeeper layout for ACLs (kafka.zk.ZkAclStore / ZkAclChangeStore): paths and
JSON codecs, byte-compatible with what Kafka's AclAuthorizer and kafka-acls write.

    /kafka-acl/<Type>/<name>                      literal patterns (`*` included)
    /kafka-acl-extended/prefixed/<Type>/<name>    prefixed patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>          `TOPIC:orders` (a literal pattern)
    /kafka-acl-extended-changes/acl_changes_<seq>
        {"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}

<Type> is Kafka's Pascal-case name (Topic, Group, Cluster, TransactionalId); the cluster
resource is /kafka-acl/Cluster/kafka-cluster. Change notifications name the resource
with the Java enum names (Kafka decodes them case-insensitively, so older brokers'
`Topic:orders` is read too). Pure: no ZooKeeper access.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from strandline.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1
ACL_CHANGE_JSON_VERSION = 1

# The pattern types with a store of their own (Kafka's PatternType.isSpecific).
STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
ACL_CHANGE_PATHS = (LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH)
# What Kafka's createAclPaths makes at start-up.
ACL_PATHS = (
    LITERAL_ACL_PATH,
    f"{EXTENDED_ACL_PATH}/{PatternType.PREFIXED.name.lower()}",
    LITERAL_ACL_CHANGES_PATH,
    EXTENDED_ACL_CHANGES_PATH,
)


def store_path(pattern_type: PatternType) -> str:
    """The root of one pattern type's ACLs."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type.is_specific:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"no ACL store for pattern type {pattern_type}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{resource_type.pascal_name}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def change_path(pattern_type: PatternType) -> str:
    """The directory whose sequential children announce changes of this pattern type."""
    return (
        LITERAL_ACL_CHANGES_PATH
        if pattern_type == PatternType.LITERAL
        else (EXTENDED_ACL_CHANGES_PATH)
    )


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


# --- resource znodes ---------------------------------------------------------------


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    return _dumps(
        {
            "version": ACL_JSON_VERSION,
            "acls": [
                {
                    "principal": e.principal,
                    "permissionType": e.permission_type.pascal_name,
                    "operation": e.operation.pascal_name,
                    "host": e.host,
                }
                for e in sorted(entries, key=_entry_order)
            ],
        }
    )


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource znode's entries; an empty znode has none (Kafka's AclEntry.fromBytes)."""
    if not data:
        return frozenset()
    obj = json.loads(data.decode("utf-8"))
    if obj is None:
        return frozenset()
    if obj.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL znode version {obj.get('version')!r}")
    return frozenset(
        AccessControlEntry(
            principal=str(item["principal"]),
            host=str(item["host"]),
            operation=AclOperation.from_name(str(item["operation"])),
            permission_type=AclPermissionType.from_name(str(item["permissionType"])),
        )
        for item in obj.get("acls") or ()
    )


def _entry_order(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, e.operation, e.permission_type)


# --- change notifications ----------------------------------------------------------


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return _dumps(
        {
            "version": ACL_CHANGE_JSON_VERSION,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
    )


def decode_acl_change(change_dir: str, data: bytes) -> ResourcePattern:
    """The resource a notification under `change_dir` names."""
    text = data.decode("utf-8")
    if change_dir == LITERAL_ACL_CHANGES_PATH:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(ResourceType.from_name(kind), name, PatternType.LITERAL)
    obj = json.loads(text)
    if int(obj.get("version", 0)) > ACL_CHANGE_JSON_VERSION:
        raise ValueError(f"unsupported ACL change event version {obj.get('version')!r}")
    return ResourcePattern(
        ResourceType.from_name(str(obj["resourceType"])),
        str(obj["name"]),
        PatternType.from_name(str(obj["patternType"])),
    )


@dataclass(frozen=True, slots=True)
class AclChangeNotification:
    """One sequential znode under a change directory. `pattern` is None when its data
    cannot be decoded (a newer writer's format): it is skipped, not fatal."""

    name: str
    sequence: int
    pattern: ResourcePattern | None
    ctime_ms: int


def change_sequence(child: str) -> int:
    """`acl_changes_0000000042` -> 42; -1 for a child that is not a notification."""
    suffix = child.removeprefix(ACL_CHANGE_PREFIX)
    return int(suffix) if suffix != child and suffix.isdigit() else -1
