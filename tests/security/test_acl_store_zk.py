"""ACLs in a real ZooKeeper (the session's, a fresh chroot per test): the store's
layout and conditional updates, change notifications, the broker's AclCache, and the
ACL admin API handlers over them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter as CkAclBindingFilter
from confluent_kafka.admin import AclOperation as CkAclOperation
from confluent_kafka.admin import AclPermissionType as CkAclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as CkResourcePatternType
from confluent_kafka.admin import ResourceType as CkResourceType
from kio.schema.create_acls.v1.request import AclCreation as AclCreationV1
from kio.schema.create_acls.v1.request import CreateAclsRequest as CreateAclsRequestV1
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v1.request import DescribeAclsRequest as DescribeAclsRequestV1
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from strandline.coordination.zk_client import ZkClient
from strandline.protocol.codec import RequestHeader, encode_response
from strandline.security import acl_znodes
from strandline.security.acl import (
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
from strandline.security.acl_cache import CHANGE_EXPIRATION_MS, AclCache
from strandline.security.acl_store import ZkAclStore
from strandline.security.authorizer import Authorizer
from strandline.security.principal import ANONYMOUS, user
from strandline.server.apis import acls as acl_apis
from tests.cli.support import tool
from tests.conftest import ClusterFactory
from tests.integration.wire import WireClient, api_versions
from tests.waiting import wait_until

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ORDERS = ResourcePattern(TOPIC, "orders", LIT)
ORD_PREFIX = ResourcePattern(TOPIC, "ord", PRE)
ALICE_READ = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
BOB_WRITE = AccessControlEntry("User:bob", "*", Op.WRITE, ALLOW)
ALICE, BOB = user("alice"), user("bob")


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect, session_timeout_ms=4000).connect()
    yield client
    client.close()


@pytest.fixture
def other_zk(zk_connect: str) -> Iterator[ZkClient]:
    """A second session on the same chroot: another broker or a tool."""
    client = ZkClient(zk_connect, session_timeout_ms=4000).connect()
    yield client
    client.close()


# --- the store -----------------------------------------------------------------------


def test_add_list_remove_with_kafka_layout(zk: ZkClient) -> None:
    ZkAclStore(zk).create_acl_paths()
    assert ZkAclStore(zk).get_acls(ORDERS) == (frozenset(), -1)
    assert ZkAclStore(zk).add_acls(ORDERS, [ALICE_READ]) == {ALICE_READ}
    assert ZkAclStore(zk).add_acls(ORDERS, [BOB_WRITE, ALICE_READ]) == {ALICE_READ, BOB_WRITE}
    ZkAclStore(zk).add_acls(ORD_PREFIX, [BOB_WRITE])
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    ZkAclStore(zk).add_acls(
        cluster, [AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, ALLOW)]
    )

    entries, version = ZkAclStore(zk).get_acls(ORDERS)
    assert entries == {ALICE_READ, BOB_WRITE} and version == 1
    data, _ = zk.kazoo.get("/kafka-acl/Topic/orders")
    assert json.loads(data)["acls"][0] == {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "Read",
        "host": "*",
    }
    assert zk.kazoo.exists("/kafka-acl-extended/prefixed/Topic/ord")
    data, _ = zk.kazoo.get("/kafka-acl/Cluster/kafka-cluster")
    assert json.loads(data)["acls"][0]["operation"] == "IdempotentWrite"
    assert set(ZkAclStore(zk).list_acl_patterns()) == {ORDERS, ORD_PREFIX, cluster}
    assert ZkAclStore(zk).get_all_acls() == {
        ORDERS: {ALICE_READ, BOB_WRITE},
        ORD_PREFIX: {BOB_WRITE},
        cluster: {AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, ALLOW)},
    }

    removed, remaining = ZkAclStore(zk).remove_acls(ORDERS, lambda e: e.principal == "User:alice")
    assert removed == {ALICE_READ} and remaining == {BOB_WRITE}
    # Removing the last entry deletes the znode, as Kafka does.
    removed, remaining = ZkAclStore(zk).remove_acls(ORDERS, lambda e: True)
    assert removed == {BOB_WRITE} and remaining == frozenset()
    assert not zk.kazoo.exists("/kafka-acl/Topic/orders")
    assert ZkAclStore(zk).remove_acls(ORDERS, lambda e: True) == (frozenset(), frozenset())


def test_each_real_change_is_announced_once(zk: ZkClient) -> None:
    ZkAclStore(zk).add_acls(ORDERS, [ALICE_READ])
    ZkAclStore(zk).add_acls(ORDERS, [ALICE_READ])  # no change: no notification
    ZkAclStore(zk).add_acls(ORD_PREFIX, [BOB_WRITE])
    ZkAclStore(zk).remove_acls(ORDERS, lambda e: True)
    literal = ZkAclStore(zk).get_acl_change_notifications("/kafka-acl-changes")
    assert [n.pattern for n in literal] == [ORDERS, ORDERS]
    assert all(n.name.startswith("acl_changes_") and len(n.name) == 22 for n in literal)
    data, _ = zk.kazoo.get(f"/kafka-acl-changes/{literal[0].name}")
    assert data == b"TOPIC:orders"
    extended = ZkAclStore(zk).get_acl_change_notifications("/kafka-acl-extended-changes")
    assert [n.pattern for n in extended] == [ORD_PREFIX]
    data, _ = zk.kazoo.get(f"/kafka-acl-extended-changes/{extended[0].name}")
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    after_first = ZkAclStore(zk).get_acl_change_notifications(
        "/kafka-acl-changes", literal[0].sequence
    )
    assert [n.name for n in after_first] == [literal[1].name]


def test_conditional_update_survives_an_interleaved_writer(
    zk: ZkClient, other_zk: ZkClient
) -> None:
    ZkAclStore(zk).add_acls(ORDERS, [ALICE_READ])
    calls = 0

    def add_deny(current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
        nonlocal calls
        calls += 1
        if calls == 1:
            # Another writer commits between our read and our write.
            ZkAclStore(other_zk).add_acls(ORDERS, [BOB_WRITE])
        return current | {AccessControlEntry("User:eve", "*", Op.ALL, DENY)}

    before, after = ZkAclStore(zk).update_acls(ORDERS, add_deny)
    assert calls == 2
    assert before == {ALICE_READ, BOB_WRITE}
    assert (
        ZkAclStore(zk).get_acls(ORDERS)[0]
        == after
        == before | {AccessControlEntry("User:eve", "*", Op.ALL, DENY)}
    )


def test_concurrent_writers_lose_nothing(zk_connect: str) -> None:
    writers, per_writer = 6, 5
    clients = [ZkClient(zk_connect, session_timeout_ms=4000).connect() for _ in range(writers)]
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def write(i: int) -> None:
        try:
            start.wait()
            for j in range(per_writer):
                principals = (f"User:w{i}", f"User:w{i}-{j}")
                ZkAclStore(clients[i]).add_acls(
                    ORDERS, [AccessControlEntry(p, "*", Op.READ, ALLOW) for p in principals]
                )
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        entries, _ = ZkAclStore(clients[0]).get_acls(ORDERS)
        expected = {f"User:w{i}" for i in range(writers)} | {
            f"User:w{i}-{j}" for i in range(writers) for j in range(per_writer)
        }
        assert {e.principal for e in entries} == expected
    finally:
        for c in clients:
            c.close()


def test_reads_what_kafka_writes(zk: ZkClient) -> None:
    """Znodes exactly as Kafka's AclAuthorizer leaves them (spacing, key order, an
    unknown resource-type directory) load into the cache."""
    zk.kazoo.create(
        "/kafka-acl/Group/team",
        b'{"version": 1, "acls": [ { "host":"10.0.0.1", "permissionType": "Deny",'
        b'"operation": "Read","principal": "User:alice"}]}',
        makepath=True,
    )
    zk.kazoo.create("/kafka-acl/SomethingNew/x", b'{"version":1,"acls":[]}', makepath=True)
    auth = Authorizer()
    AclCache(zk, auth).start(watch=False)
    assert auth.entries(ResourcePattern(GROUP, "team")) == {
        AccessControlEntry("User:alice", "10.0.0.1", Op.READ, DENY)
    }
    assert auth.patterns() == [ResourcePattern(GROUP, "team")]


# --- the broker's cache ----------------------------------------------------------------


def test_cache_loads_then_follows_notifications(zk: ZkClient, other_zk: ZkClient) -> None:
    ZkAclStore(other_zk).add_acls(ORDERS, [ALICE_READ])
    auth = Authorizer()
    cache = AclCache(zk, auth)
    cache.start()
    try:
        assert auth.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
        assert not auth.authorize(BOB, "h", Op.WRITE, TOPIC, "orders-eu")

        # Another broker (or a tool) writes: the watch reloads the named resources.
        ZkAclStore(other_zk).add_acls(ORD_PREFIX, [BOB_WRITE])
        wait_until(
            "the authorizer to see the new ACL",
            lambda: auth.authorize(BOB, "h", Op.WRITE, TOPIC, "orders-eu"),
            5.0,
        )
        ZkAclStore(other_zk).remove_acls(ORDERS, lambda e: True)
        wait_until("the authorizer to drop the ACLs", lambda: not auth.entries(ORDERS), 5.0)
        assert auth.patterns() == [ORD_PREFIX]
    finally:
        cache.close()


def test_process_changes_applies_each_notification_once(zk: ZkClient, other_zk: ZkClient) -> None:
    auth = Authorizer()
    cache = AclCache(zk, auth)
    ZkAclStore(other_zk).add_acls(ORDERS, [ALICE_READ])
    cache.start(watch=False)
    # Notifications from before the load are already reflected, not replayed.
    assert cache.process_changes() == 0
    assert auth.entries(ORDERS) == {ALICE_READ}

    ZkAclStore(other_zk).add_acls(ORDERS, [BOB_WRITE])
    ZkAclStore(other_zk).add_acls(ORD_PREFIX, [BOB_WRITE])
    assert cache.process_changes() == 2
    assert auth.entries(ORDERS) == {ALICE_READ, BOB_WRITE}
    assert auth.entries(ORD_PREFIX) == {BOB_WRITE}
    assert cache.process_changes() == 0

    # A change written without its notification is not seen until one names it.
    other_zk.kazoo.set("/kafka-acl/Topic/orders", acl_znodes.encode_acls([BOB_WRITE]))
    assert cache.process_changes() == 0
    assert auth.entries(ORDERS) == {ALICE_READ, BOB_WRITE}
    ZkAclStore(other_zk).create_acl_change_notification(ORDERS)
    assert cache.process_changes() == 1
    assert auth.entries(ORDERS) == {BOB_WRITE}


def test_expired_notifications_are_purged(zk: ZkClient, other_zk: ZkClient) -> None:
    now = [int(time.time() * 1000)]
    cache = AclCache(zk, Authorizer(), now_ms=lambda: now[0])
    cache.start(watch=False)
    ZkAclStore(other_zk).add_acls(ORDERS, [ALICE_READ])
    ZkAclStore(other_zk).add_acls(ORD_PREFIX, [ALICE_READ])
    cache.process_changes()
    assert zk.kazoo.get_children("/kafka-acl-changes")
    now[0] += CHANGE_EXPIRATION_MS + 60_000
    cache.process_changes()
    assert zk.kazoo.get_children("/kafka-acl-changes") == []
    assert zk.kazoo.get_children("/kafka-acl-extended-changes") == []


def test_cache_writes_update_the_local_authorizer_at_once(zk: ZkClient) -> None:
    auth = Authorizer()
    cache = AclCache(zk, auth)
    cache.start(watch=False)
    deny = AccessControlEntry("User:alice", "*", Op.READ, DENY)
    results = cache.create_acls(
        [
            AclBinding(ORDERS, ALICE_READ),
            AclBinding(ORDERS, deny),
            AclBinding(ORD_PREFIX, BOB_WRITE),
        ]
    )
    assert results == [None, None, None]
    assert not auth.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    any_entry = AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY)
    deleted = cache.delete_acls(
        [
            AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", LIT), deny.to_filter()),
            # MATCH reaches the prefixed pattern too; orders' deny counts for filter 0.
            AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), any_entry),
            AclBindingFilter(ResourcePatternFilter(GROUP, "nothing", LIT), any_entry),
        ]
    )
    assert deleted[0] == [(AclBinding(ORDERS, deny), None)]
    assert sorted(str(b) for b, _ in deleted[1]) == sorted(
        [str(AclBinding(ORDERS, ALICE_READ)), str(AclBinding(ORD_PREFIX, BOB_WRITE))]
    )
    assert deleted[2] == []
    assert auth.patterns() == [] and ZkAclStore(zk).list_acl_patterns() == []


# --- the admin API handlers ------------------------------------------------------------


def handle(handler: Any, ctx: Any, api_key: int, version: int, request: Any) -> Any:
    response = asyncio.run(handler(ctx, RequestHeader(api_key, version, 7, "test"), request))
    assert b"".join(encode_response(7, response))  # the response serialises
    return response


def creation(**overrides: Any) -> AclCreation:
    fields: dict[str, Any] = {
        "resource_type": i8(2),
        "resource_name": "orders",
        "resource_pattern_type": i8(3),
        "principal": "User:alice",
        "host": "*",
        "operation": i8(3),
        "permission_type": i8(3),
    }
    fields.update(overrides)
    return AclCreation(**fields)


def describe_everything(version: int = 3) -> Any:
    request_class = DescribeAclsRequest if version == 3 else DescribeAclsRequestV1
    return request_class(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


def test_handlers_answer_security_disabled_without_authorizer() -> None:
    ctx = SimpleNamespace(authorizer=None)
    created = handle(
        acl_apis.create_acls, ctx, 30, 3, CreateAclsRequest(creations=(creation(), creation()))
    )
    assert [r.error_code for r in created.results] == [ErrorCode.security_disabled] * 2
    described = handle(acl_apis.describe_acls, ctx, 29, 3, describe_everything())
    assert described.error_code == ErrorCode.security_disabled
    deleted = handle(
        acl_apis.delete_acls,
        ctx,
        31,
        3,
        DeleteAclsRequest(filters=(any_filter(),)),
    )
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.security_disabled]


def any_filter(**overrides: Any) -> DeleteAclsFilter:
    fields: dict[str, Any] = {
        "resource_type_filter": i8(1),
        "resource_name_filter": None,
        "pattern_type_filter": i8(1),
        "principal_filter": None,
        "host_filter": None,
        "operation": i8(1),
        "permission_type": i8(1),
    }
    fields.update(overrides)
    return DeleteAclsFilter(**fields)


def test_handlers_create_describe_delete(zk: ZkClient) -> None:
    # Called in-process, the handlers see an anonymous session: make it a super user
    # (ALTER/DESCRIBE on the cluster is needed; the denial is the next test).
    auth = Authorizer(super_users={ANONYMOUS})
    cache = AclCache(zk, auth)
    cache.start(watch=False)
    ctx = SimpleNamespace(authorizer=auth, acl_cache=cache)
    bad = [
        creation(resource_pattern_type=i8(1)),  # ANY
        creation(resource_pattern_type=i8(2)),  # MATCH
        creation(resource_type=i8(0)),  # UNKNOWN
        creation(operation=i8(1)),  # ANY
        creation(permission_type=i8(0)),  # UNKNOWN
        creation(resource_type=i8(4), resource_name="other"),  # CLUSTER by another name
        creation(resource_name=""),
        creation(resource_name="a/b"),
        creation(principal="alice"),
    ]
    good = [creation(), creation(resource_name="ord", resource_pattern_type=i8(4), operation=i8(4))]
    created = handle(acl_apis.create_acls, ctx, 30, 3, CreateAclsRequest(creations=(*bad, *good)))
    codes = [r.error_code for r in created.results]
    assert codes == [ErrorCode.invalid_request] * len(bad) + [ErrorCode.none] * 2
    assert "kafka-cluster" in created.results[5].error_message
    assert ZkAclStore(zk).get_acls(ORDERS)[0] == {ALICE_READ}
    assert auth.entries(ORD_PREFIX) == {AccessControlEntry("User:alice", "*", Op.WRITE, ALLOW)}

    # v1 (librdkafka, kafka-python) works the same.
    v1 = CreateAclsRequestV1(
        creations=(
            AclCreationV1(
                resource_type=i8(3),
                resource_name="team",
                resource_pattern_type=i8(3),
                principal="User:bob",
                host="*",
                operation=i8(3),
                permission_type=i8(3),
            ),
        )
    )
    assert handle(acl_apis.create_acls, ctx, 30, 1, v1).results[0].error_code == ErrorCode.none

    def describe(**overrides: Any) -> Any:
        fields: dict[str, Any] = {
            "resource_type_filter": i8(2),
            "resource_name_filter": "orders",
            "pattern_type_filter": i8(2),  # MATCH
            "principal_filter": None,
            "host_filter": None,
            "operation": i8(1),
            "permission_type": i8(1),
        }
        fields.update(overrides)
        return handle(acl_apis.describe_acls, ctx, 29, 3, DescribeAclsRequest(**fields))

    described = describe()
    assert described.error_code == ErrorCode.none
    assert {(r.resource_name, int(r.pattern_type)) for r in described.resources} == {
        ("orders", 3),
        ("ord", 4),
    }
    assert describe(operation=i8(0)).error_code == ErrorCode.invalid_request
    everything = describe(resource_type_filter=i8(1), resource_name_filter=None)
    assert len(everything.resources) == 3

    deleted = handle(
        acl_apis.delete_acls,
        ctx,
        31,
        3,
        DeleteAclsRequest(
            filters=(
                any_filter(resource_type_filter=i8(2), pattern_type_filter=i8(4)),
                any_filter(operation=i8(0)),
                any_filter(resource_type_filter=i8(3)),
            )
        ),
    )
    first, unknown, groups = deleted.filter_results
    assert first.error_code == ErrorCode.none
    assert [(m.resource_name, int(m.operation)) for m in first.matching_acls] == [("ord", 4)]
    assert unknown.error_code == ErrorCode.invalid_request
    assert [m.resource_name for m in groups.matching_acls] == ["team"]
    assert set(ZkAclStore(zk).list_acl_patterns()) == {ORDERS}
    assert auth.patterns() == [ORDERS]


# --- a real broker without an authorizer -------------------------------------------------


def test_broker_without_authorizer_answers_security_disabled(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(brokers=1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    binding = CkAclBinding(
        CkResourceType.TOPIC,
        "orders",
        CkResourcePatternType.LITERAL,
        "User:alice",
        "*",
        CkAclOperation.READ,
        CkAclPermissionType.ALLOW,
    )
    anything: Any = None  # librdkafka's "any"; its type stubs only say str
    any_filter = CkAclBindingFilter(
        CkResourceType.ANY,
        anything,
        CkResourcePatternType.ANY,
        anything,
        anything,
        CkAclOperation.ANY,
        CkAclPermissionType.ANY,
    )
    futures = [
        *admin.create_acls([binding], request_timeout=30).values(),
        *admin.delete_acls([any_filter], request_timeout=30).values(),
    ]
    for future in futures:
        with pytest.raises(KafkaException) as raised:
            future.result(60)
        assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error (it answers an empty list), so
    # the broker's answer is checked on the wire, in the versions clients send.
    assert admin.describe_acls(any_filter, request_timeout=30).result(60) == []
    with WireClient(cluster.bootstrap) as wire:
        advertised = {
            int(k.api_key): (int(k.min_version), int(k.max_version))
            for k in wire.request(api_versions()).api_keys
        }
        assert {k: advertised[k] for k in (29, 30, 31)} == {29: (1, 3), 30: (1, 3), 31: (1, 3)}
        for version in (1, 3):
            answer = wire.request(describe_everything(version), response_version=version)
            assert answer.error_code == ErrorCode.security_disabled
            assert answer.error_message == "No Authorizer is configured on the broker"

    _run, _ok, fails = tool("acls")
    line = fails(
        "--bootstrap-server",
        cluster.bootstrap,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
    )
    assert "no authorizer" in line and "authorizer.class.name" in line


def test_handlers_need_cluster_rights(zk: ZkClient) -> None:
    auth = Authorizer()  # no super user: the anonymous in-process session has no right
    cache = AclCache(zk, auth)
    cache.start(watch=False)
    ctx = SimpleNamespace(authorizer=auth, acl_cache=cache)
    created = handle(acl_apis.create_acls, ctx, 30, 3, CreateAclsRequest(creations=(creation(),)))
    assert [r.error_code for r in created.results] == [ErrorCode.cluster_authorization_failed]
    assert ZkAclStore(zk).get_acls(ORDERS)[0] == set()
    deleted = handle(acl_apis.delete_acls, ctx, 31, 3, DeleteAclsRequest(filters=(any_filter(),)))
    assert [r.error_code for r in deleted.filter_results] == [
        ErrorCode.cluster_authorization_failed
    ]
