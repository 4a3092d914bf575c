"""An authorization matrix generated from the API registry.

Every API key the broker answers (`REGISTRY`) must have a row: either a matrix case,
run here against a SASL_SSL broker with the ACL authorizer as three principals — bob
(no ACL), alice (exactly the right ACL on the case's resource: a topic, group, the
cluster or a transactional id) and carol (the same ACL on another resource) — or an
entry in `NOT_IN_MATRIX` saying why not (yet). A new API added without a
row fails `test_every_registered_api_has_a_row`.

Each case checks Kafka's answer per principal; every refused request together must
change nothing (`_state`: topics and replicas, offsets, retention, groups and their
committed offsets, ACLs, reassignments), and alice's allowed ones must have done their
work.
"""

from __future__ import annotations

import datetime
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.describe_configs.v4 import request as describe_configs_v4
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

import strandline.server.apis  # noqa: F401 - fills REGISTRY
from strandline.cli.txn_wire import DescribeTransactionsResponseV0
from strandline.client.admin import request
from strandline.server.apis.registry import REGISTRY
from tests.integration import wire
from tests.security.test_hardening import (
    ALICE,
    BOB,
    ONE_OFFSETS_PARTITION,
    admin_client,
    admin_of,
    ask,
    delete_records,
    list_latest,
)
from tests.security.test_secured_cluster import add_users, create_topic, produce
from tests.waiting import wait_until

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster
    from tests.conftest import ClusterFactory

TOPIC = "mx"
OTHER = "mx-other"
CAROL = ("carol", "carol-secret")


@dataclass(frozen=True)
class Case:
    api_key: int
    operation: str  # the ACL operation alice has on `resource` and carol on `other`
    request: Callable[[], Any]
    error: Callable[[Any], ErrorCode]
    resource: tuple[str, str] = ("TOPIC", TOPIC)
    other: tuple[str, str] = ("TOPIC", OTHER)
    denied: ErrorCode = ErrorCode.topic_authorization_failed
    allowed: ErrorCode = ErrorCode.none  # Kafka's answer to alice
    controller: bool = False  # sent to the controller (broker 1 here: one broker)


def _describe_configs() -> Any:
    return describe_configs_v4.DescribeConfigsRequest(
        resources=(
            describe_configs_v4.DescribeConfigsResource(
                resource_type=i8(2), resource_name=TOPIC, configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )


GROUP, DEL_GROUP, OD_GROUP = "mx-g", "mx-dg", "mx-od"
NEW_TOPIC, DEL_TOPIC, GROW_TOPIC, TXN = "mx-new", "mx-del", "mx-grow", "mx-tx"
CLUSTER = ("BROKER", "kafka-cluster")
TIMEOUT = datetime.timedelta(seconds=20)
_G = ErrorCode.group_authorization_failed
_C = ErrorCode.cluster_authorization_failed


def _topic_error(r: Any) -> ErrorCode:
    return ErrorCode(r.topics[0].error_code)


def _partition_error(r: Any) -> ErrorCode:
    return ErrorCode(r.topics[0].partitions[0].error_code)


def _commit(group: str, offset: int) -> Any:
    return request(
        8, 7, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=-1,
        member_id="", group_instance_id=None,
        topics=(request(8, 7, "OffsetCommitRequestTopic", name=TOPIC, partitions=(
            request(8, 7, "OffsetCommitRequestPartition", partition_index=0,
                    committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),
        )),),
    )  # fmt: skip


def _find(group: str) -> Any:
    # Creates __consumer_offsets the first time, as a client's first FindCoordinator does.
    return request(10, 3, "FindCoordinatorRequest", key=group, key_type=0)


def _offset_fetch(group: str) -> Any:
    return request(9, 7, "OffsetFetchRequest", group_id=group, topics=None, require_stable=False)


def _acl(principal: str) -> dict[str, Any]:
    return dict(
        resource_type=2, resource_name="mx-acl", resource_pattern_type=3,
        principal=principal, host="*", operation=3, permission_type=3,
    )  # fmt: skip


def _alter_config(key: int, value: str) -> Any:
    if key == 44:
        config = request(44, 0, "AlterableConfig", name="retention.ms", config_operation=0,
                         value=value)  # fmt: skip
    else:
        config = request(33, 1, "AlterableConfig", name="retention.ms", value=value)
    return request(
        key, 0 if key == 44 else 1,
        "IncrementalAlterConfigsRequest" if key == 44 else "AlterConfigsRequest",
        resources=(request(key, 0 if key == 44 else 1, "AlterConfigsResource", resource_type=2,
                           resource_name=TOPIC, configs=(config,)),),
        validate_only=False,
    )  # fmt: skip


GROUP_CASES = (
    # FindCoordinator, then the group's own APIs at its coordinator (broker 1).
    Case(10, "DESCRIBE", lambda: _find(GROUP),
         lambda r: ErrorCode(r.error_code), ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G),
    Case(8, "READ", lambda: _commit(GROUP, 2), _partition_error,
         ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G),
    Case(9, "DESCRIBE", lambda: _offset_fetch(GROUP), lambda r: ErrorCode(r.error_code),
         ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G),
    Case(15, "DESCRIBE",
         lambda: request(15, 5, "DescribeGroupsRequest", groups=(GROUP,),
                         include_authorized_operations=False),
         lambda r: ErrorCode(r.groups[0].error_code), ("GROUP", GROUP), ("GROUP", "mx-g-other"),
         _G),
    # v5 without a member id: Kafka hands out one and asks to join again with it.
    Case(11, "READ",
         lambda: request(11, 5, "JoinGroupRequest", group_id="mx-join",
                         session_timeout=datetime.timedelta(seconds=10),
                         rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                         group_instance_id=None, protocol_type="consumer",
                         protocols=(request(11, 5, "JoinGroupRequestProtocol", name="range",
                                            metadata=b""),)),
         lambda r: ErrorCode(r.error_code), ("GROUP", "mx-join"), ("GROUP", "mx-g-other"), _G,
         ErrorCode.member_id_required),
    Case(47, "DELETE",
         lambda: request(47, 0, "OffsetDeleteRequest", group_id=OD_GROUP, topics=(
             request(47, 0, "OffsetDeleteRequestTopic", name=TOPIC, partitions=(
                 request(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),)),
         lambda r: ErrorCode(r.error_code), ("GROUP", OD_GROUP), ("GROUP", "mx-g-other"), _G),
    Case(42, "DELETE", lambda: request(42, 2, "DeleteGroupsRequest", groups_names=(DEL_GROUP,)),
         lambda r: ErrorCode(r.results[0].error_code), ("GROUP", DEL_GROUP),
         ("GROUP", "mx-g-other"), _G),
    # A member the group does not have: alice, allowed, hears UNKNOWN_MEMBER_ID.
    Case(12, "READ", lambda: request(12, 4, "HeartbeatRequest", group_id=GROUP, generation_id=1,
                                     member_id="mx-ghost", group_instance_id=None),
         lambda r: ErrorCode(r.error_code), ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G,
         ErrorCode.unknown_member_id),
    Case(14, "READ", lambda: request(14, 5, "SyncGroupRequest", group_id=GROUP, generation_id=1,
                                     member_id="mx-ghost", group_instance_id=None,
                                     protocol_type="consumer", protocol_name="range",
                                     assignments=()),
         lambda r: ErrorCode(r.error_code), ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G,
         ErrorCode.unknown_member_id),
    # v3+: the top-level error, else the member's own.
    Case(13, "READ", lambda: request(13, 5, "LeaveGroupRequest", group_id=GROUP, members=(
             request(13, 5, "MemberIdentity", member_id="mx-ghost", group_instance_id=None,
                     reason=None),)),
         lambda r: ErrorCode(r.error_code) or ErrorCode(r.members[0].error_code),
         ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G, ErrorCode.unknown_member_id),
    Case(16, "DESCRIBE", lambda: request(16, 4, "ListGroupsRequest", states_filter=()),
         lambda r: ErrorCode(r.error_code) or _listed(
             GROUP in [g.group_id for g in r.groups], _G),
         ("GROUP", GROUP), ("GROUP", "mx-g-other"), _G),
)  # fmt: skip

TOPIC_ADMIN_CASES = (
    Case(19, "CREATE",
         lambda: request(19, 4, "CreateTopicsRequest", timeout=TIMEOUT, validate_only=False,
                         topics=(request(19, 4, "CreatableTopic", name=NEW_TOPIC,
                                         num_partitions=1, replication_factor=1,
                                         assignments=(), configs=()),)),
         _topic_error, ("TOPIC", NEW_TOPIC)),
    Case(20, "DELETE",
         lambda: request(20, 4, "DeleteTopicsRequest", topic_names=(DEL_TOPIC,), timeout=TIMEOUT),
         lambda r: ErrorCode(r.responses[0].error_code), ("TOPIC", DEL_TOPIC)),
    Case(37, "ALTER",
         lambda: request(37, 1, "CreatePartitionsRequest", timeout=TIMEOUT, validate_only=False,
                         topics=(request(37, 1, "CreatePartitionsTopic", name=GROW_TOPIC, count=2,
                                         assignments=None),)),
         lambda r: ErrorCode(r.results[0].error_code), ("TOPIC", GROW_TOPIC)),
    Case(44, "ALTER_CONFIGS", lambda: _alter_config(44, "123456"),
         lambda r: ErrorCode(r.responses[0].error_code)),
    Case(33, "ALTER_CONFIGS", lambda: _alter_config(33, "654321"),
         lambda r: ErrorCode(r.responses[0].error_code)),
)  # fmt: skip

CLUSTER_CASES = (
    Case(30, "ALTER", lambda: request(30, 2, "CreateAclsRequest", creations=(
             request(30, 2, "AclCreation", **_acl("User:nobody")),)),
         lambda r: ErrorCode(r.results[0].error_code), CLUSTER, ("TOPIC", OTHER), _C),
    Case(31, "ALTER", lambda: request(31, 2, "DeleteAclsRequest", filters=(
             request(31, 2, "DeleteAclsFilter", **{
                 k.replace("resource_type", "resource_type_filter")
                 .replace("resource_name", "resource_name_filter")
                 .replace("resource_pattern_type", "pattern_type_filter")
                 .replace("principal", "principal_filter").replace("host", "host_filter"): v
                 for k, v in _acl("User:nobody").items()}),)),
         lambda r: ErrorCode(r.filter_results[0].error_code), CLUSTER, ("TOPIC", OTHER), _C),
    Case(29, "DESCRIBE", lambda: request(29, 2, "DescribeAclsRequest", resource_type_filter=1,
                                         resource_name_filter=None, pattern_type_filter=1,
                                         principal_filter=None, host_filter=None, operation=1,
                                         permission_type=1),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C),
    Case(46, "DESCRIBE", lambda: request(46, 0, "ListPartitionReassignmentsRequest",
                                         timeout=TIMEOUT, topics=None),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C, controller=True),
    # To the replicas it has: a reassignment that completes at once.
    Case(45, "ALTER", lambda: request(45, 0, "AlterPartitionReassignmentsRequest",
                                      timeout=TIMEOUT, topics=(
             request(45, 0, "ReassignableTopic", name=TOPIC, partitions=(
                 request(45, 0, "ReassignablePartition", partition_index=0, replicas=(1,)),)),)),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C, controller=True),
    Case(43, "ALTER", lambda: request(43, 2, "ElectLeadersRequest", election_type=0,
                                      timeout=TIMEOUT, topic_partitions=(
             request(43, 2, "TopicPartitions", topic=TOPIC, partitions=(0,)),)),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C, controller=True),
    Case(51, "ALTER", lambda: _scram_upsertion(), lambda r: ErrorCode(r.results[0].error_code),
         CLUSTER, ("TOPIC", OTHER), _C),
    Case(50, "DESCRIBE", lambda: request(50, 0, "DescribeUserScramCredentialsRequest",
                                         users=None),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C),
    Case(35, "DESCRIBE", lambda: request(35, 4, "DescribeLogDirsRequest", topics=None),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), _C),
    # Kafka checks no ACL for DescribeCluster: everyone is answered.
    Case(60, "DESCRIBE", lambda: request(60, 0, "DescribeClusterRequest",
                                         include_cluster_authorized_operations=False),
         lambda r: ErrorCode(r.error_code), CLUSTER, ("TOPIC", OTHER), ErrorCode.none),
)  # fmt: skip

# Alice's producer, from her InitProducerId: her transaction's later requests use it.
_PRODUCER = {"id": -1, "epoch": -1}
SCRAM_USER, TXN_TOPIC, TXN_OTHER = "mx-user", "mx-txt", ("TRANSACTIONAL_ID", "mx-tx-other")
_T = ErrorCode.transactional_id_authorization_failed


def _init_producer_error(r: Any) -> ErrorCode:
    if r.error_code == ErrorCode.none:
        _PRODUCER.update(id=int(r.producer_id), epoch=int(r.producer_epoch))
    return ErrorCode(r.error_code)


def _producer(key: int) -> dict[str, Any]:
    prefix = "v3_and_below_" if key == 24 else ""
    return {f"{prefix}transactional_id": TXN, f"{prefix}producer_id": _PRODUCER["id"],
            f"{prefix}producer_epoch": _PRODUCER["epoch"]}  # fmt: skip


def _scram_upsertion() -> Any:
    salt = b"mx-salt-0123456789"
    salted = hashlib.pbkdf2_hmac("sha256", b"mx-user-secret", salt, 4096)
    return request(51, 0, "AlterUserScramCredentialsRequest", deletions=(), upsertions=(
        request(51, 0, "ScramCredentialUpsertion", name=SCRAM_USER, mechanism=1,  # SHA-256
                iterations=4096, salt=salt, salted_password=salted),))  # fmt: skip


def _listed(present: bool, denied: ErrorCode) -> ErrorCode:
    # Kafka answers a listing without error and leaves out what the principal may not
    # describe: the refusal is the entry missing.
    return ErrorCode.none if present else denied


TXN_CASES = (
    Case(22, "WRITE", lambda: request(22, 4, "InitProducerIdRequest", transactional_id=TXN,
                                      transaction_timeout=datetime.timedelta(seconds=30),
                                      producer_id=-1, producer_epoch=-1),
         _init_producer_error, ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    # Alice's transaction, in a producer's order; its topic is TXN_TOPIC (she has WRITE).
    Case(24, "WRITE", lambda: request(24, 3, "AddPartitionsToTxnRequest", **_producer(24),
                                      v3_and_below_topics=(
             request(24, 3, "AddPartitionsToTxnTopic", name=TXN_TOPIC, partitions=(0,)),)),
         lambda r: ErrorCode(r.results_by_topic_v3_and_below[0].results_by_partition[0]
                             .partition_error_code),
         ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    # READ on GROUP too: alice has it (OffsetCommit's row); carol is refused before.
    Case(25, "WRITE", lambda: request(25, 3, "AddOffsetsToTxnRequest", **_producer(25),
                                      group_id=GROUP),
         lambda r: ErrorCode(r.error_code), ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    Case(28, "WRITE", lambda: request(28, 3, "TxnOffsetCommitRequest", **_producer(28),
                                      group_id=GROUP, generation_id=-1, member_id="",
                                      group_instance_id=None, topics=(
             request(28, 3, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(
                 request(28, 3, "TxnOffsetCommitRequestPartition", partition_index=0,
                         committed_offset=3, committed_leader_epoch=-1,
                         committed_metadata=""),)),)),
         _partition_error, ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    Case(26, "WRITE", lambda: request(26, 3, "EndTxnRequest", **_producer(26), committed=True),
         lambda r: ErrorCode(r.error_code), ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    # kio refuses the -1 start time of a refused or Empty transaction: the CLI's reader.
    Case(65, "DESCRIBE", lambda: (request(65, 0, "DescribeTransactionsRequest",
                                          transactional_ids=(TXN,)),
                                  DescribeTransactionsResponseV0),
         lambda r: ErrorCode(r.transaction_states[0].error_code), ("TRANSACTIONAL_ID", TXN),
         TXN_OTHER, _T),
    Case(66, "DESCRIBE", lambda: request(66, 1, "ListTransactionsRequest", state_filters=(),
                                         producer_id_filters=(), duration_filter=-1),
         lambda r: ErrorCode(r.error_code) or _listed(
             TXN in [t.transactional_id for t in r.transaction_states], _T),
         ("TRANSACTIONAL_ID", TXN), TXN_OTHER, _T),
    # Inter-broker: only a principal with CLUSTER_ACTION (alice) may write a marker; hers
    # aborts a producer that never wrote to TXN_TOPIC, which Kafka accepts.
    Case(27, "CLUSTER_ACTION", lambda: request(27, 1, "WriteTxnMarkersRequest", markers=(
             request(27, 1, "WritableTxnMarker", producer_id=987654321, producer_epoch=0,
                     transaction_result=False, coordinator_epoch=0, topics=(
                 request(27, 1, "WritableTxnMarkerTopic", name=TXN_TOPIC,
                         partition_indexes=(0,)),)),)),
         lambda r: ErrorCode(r.markers[0].topics[0].partitions[0].error_code), CLUSTER,
         ("TOPIC", OTHER), _C),
)  # fmt: skip

CASES = (
    Case(0, "WRITE", lambda: wire.produce(TOPIC, 0, wire.batch([b"m"])), wire.produce_error),
    Case(1, "READ", lambda: wire.fetch(TOPIC, 0, 0), lambda r: wire.fetch_partition(r).error_code),
    Case(
        2,
        "DESCRIBE",
        lambda: list_latest(TOPIC, -1),
        lambda r: r.topics[0].partitions[0].error_code,
    ),
    # The same, claiming to be replica 1: a claim changes nothing (docs/security.md).
    Case(
        2, "DESCRIBE", lambda: list_latest(TOPIC, 1), lambda r: r.topics[0].partitions[0].error_code
    ),
    Case(3, "DESCRIBE", lambda: wire.metadata(TOPIC), lambda r: r.topics[0].error_code),
    Case(
        21,
        "DELETE",
        lambda: delete_records(TOPIC, 1),
        lambda r: r.topics[0].partitions[0].error_code,
    ),
    Case(32, "DESCRIBE_CONFIGS", _describe_configs, lambda r: r.results[0].error_code),
    Case(
        61,
        "READ",
        lambda: request(
            61,
            0,
            "DescribeProducersRequest",
            topics=(request(61, 0, "TopicRequest", name=TOPIC, partition_indexes=(0,)),),
        ),
        lambda r: r.topics[0].partitions[0].error_code,
    ),  # fmt: skip
    Case(
        23,
        "DESCRIBE",
        lambda: request(
            23,
            4,
            "OffsetForLeaderEpochRequest",
            replica_id=-1,
            topics=(
                request(
                    23,
                    4,
                    "OffsetForLeaderTopic",
                    topic=TOPIC,
                    partitions=(
                        request(
                            23,
                            4,
                            "OffsetForLeaderPartition",
                            partition=0,
                            current_leader_epoch=-1,
                            leader_epoch=0,
                        ),
                    ),
                ),
            ),
        ),
        lambda r: ErrorCode(r.topics[0].partitions[0].error_code),
    ),  # fmt: skip
    *GROUP_CASES,
    *TOPIC_ADMIN_CASES,
    *CLUSTER_CASES,
    *TXN_CASES,
)

_CONTROLLER = "inter-broker (CLUSTER_ACTION): test_controller_requests_from_clients_are_refused"
_PRE_AUTH = "served before authentication, no ACL: test_before_authentication_*"
NOT_IN_MATRIX: dict[int, str] = {
    4: _CONTROLLER,  # LeaderAndIsr
    5: _CONTROLLER,  # StopReplica
    6: _CONTROLLER,  # UpdateMetadata
    7: _CONTROLLER,  # ControlledShutdown
    17: _PRE_AUTH,  # SaslHandshake
    18: _PRE_AUTH,  # ApiVersions
    36: _PRE_AUTH,  # SaslAuthenticate
}


def test_every_registered_api_has_a_row() -> None:
    in_matrix = {c.api_key for c in CASES}
    assert not in_matrix & set(NOT_IN_MATRIX), "an API is both in the matrix and excused"
    missing = set(REGISTRY) - in_matrix - set(NOT_IN_MATRIX)
    assert not missing, f"APIs without an authorization-matrix row: {sorted(missing)}"
    stale = (in_matrix | set(NOT_IN_MATRIX)) - set(REGISTRY)
    assert not stale, f"rows for APIs the broker does not answer: {sorted(stale)}"


def _grant(cluster: LocalCluster, grants: dict[str, set[tuple[str, str, str]]]) -> None:
    """ALLOW each user (kind, name, operation) on LITERAL resources, as the super user."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType[kind], name, ResourcePatternType.LITERAL, f"User:{user}", "*",
            AclOperation[op], AclPermissionType.ALLOW,
        )
        for user, wanted in grants.items()
        for kind, name, op in sorted(wanted)
    ]  # fmt: skip
    admin = admin_client(cluster)  # kept: its futures fail once the handle is gone
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)


def _offsets(cluster: LocalCluster) -> tuple[int, int]:
    (answer,) = ask(cluster, admin_of(cluster), list_latest(TOPIC, -1))
    end = int(answer.topics[0].partitions[0].offset)
    (fetched,) = ask(cluster, admin_of(cluster), wire.fetch(TOPIC, 0, end))
    return int(wire.fetch_partition(fetched).log_start_offset), end


def _state(cluster: LocalCluster) -> dict[str, Any]:
    """What a refused request must not change, as the super user sees it: topics and
    their replicas, TOPIC's offsets and retention, the groups and their offsets, the
    ACLs, reassignments, and the transactional id's producer."""
    metadata, configs, listed, acls, moving, *fetched = ask(
        cluster,
        admin_of(cluster),
        request(
            3,
            9,
            "MetadataRequest",
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
        _describe_configs(),
        request(16, 4, "ListGroupsRequest", states_filter=()),
        CLUSTER_CASES[2].request(),
        CLUSTER_CASES[3].request(),
        *(_offset_fetch(g) for g in (GROUP, OD_GROUP, DEL_GROUP)),
    )
    scram, txn = ask(cluster, admin_of(cluster), CLUSTER_CASES[7].request(),
                     TXN_CASES[5].request())  # fmt: skip
    return {
        "topics": sorted(
            (str(t.name), sorted(tuple(p.replica_nodes) for p in t.partitions))
            for t in metadata.topics
        ),
        "offsets": _offsets(cluster),
        "retention": [c.value for c in configs.results[0].configs if c.name == "retention.ms"],
        "groups": sorted(g.group_id for g in listed.groups),
        "acls": sorted(
            (r.resource_type, r.resource_name, a.principal, a.operation)
            for r in acls.resources
            for a in r.acls
        ),
        "reassignments": [t.name for t in moving.topics],
        "committed": [
            sorted((t.name, p.partition_index, p.committed_offset) for t in f.topics
                   for p in t.partitions)
            for f in fetched
        ],
        "scram": sorted((r.user, sorted((c.mechanism, c.iterations) for c in r.credential_infos))
                        for r in scram.results),
        "txn": [(t.transaction_state, t.producer_id, t.producer_epoch,
                 sorted((x.topic, tuple(x.partitions)) for x in t.topics))
                for t in txn.transaction_states],
    }  # fmt: skip


RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
             ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}  # fmt: skip


def _answer(cluster: LocalCluster, user: tuple[str, str], case: Case) -> ErrorCode:
    """The case's error for `user`, asked again while a coordinator is being created."""
    deadline = time.monotonic() + 20
    while True:
        (answer,) = ask(cluster, user, case.request())
        error = case.error(answer)
        if error not in RETRIABLE or time.monotonic() > deadline:
            return error
        time.sleep(0.1)


def test_authorization_matrix(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(1, security="sasl_ssl", config=ONE_OFFSETS_PARTITION)
    add_users(cluster, dict([ALICE, BOB, CAROL]))
    produce(cluster, TOPIC, 3)
    produce(cluster, OTHER, 1)
    create_topic(cluster, DEL_TOPIC, [[1]])
    create_topic(cluster, GROW_TOPIC, [[1]])
    create_topic(cluster, TXN_TOPIC, [[1]])
    for group in (GROUP, OD_GROUP, DEL_GROUP):
        wait_until(
            f"the super user's commit for {group}",
            lambda g=group: (
                _partition_error(ask(cluster, admin_of(cluster), _find(g), _commit(g, 1))[1])
                == ErrorCode.none
            ),
            20,
        )
    wait_until(
        "a transaction coordinator",
        lambda: ask(cluster, admin_of(cluster), request(10, 3, "FindCoordinatorRequest",
                                                        key=TXN, key_type=1))[0].error_code
        == ErrorCode.none,
        20,
    )  # fmt: skip
    # TXN exists before the refused requests, so that their refusal is not its absence.
    wait_until(
        "the super user's producer",
        lambda: ask(cluster, admin_of(cluster), TXN_CASES[0].request())[0].error_code
               == ErrorCode.none,
        20,
    )  # fmt: skip
    grants: dict[str, set[tuple[str, str, str]]] = {ALICE[0]: set(), CAROL[0]: set()}
    for case in CASES:
        grants[ALICE[0]].add((*case.resource, case.operation))
        grants[CAROL[0]].add((*case.other, case.operation))
    # An offset commit or delete also needs READ on the topic: both have theirs.
    grants[ALICE[0]].add(("TOPIC", TOPIC, "READ"))
    grants[CAROL[0]].add(("TOPIC", OTHER, "READ"))
    # Alice's transaction writes to TXN_TOPIC.
    grants[ALICE[0]].add(("TOPIC", TXN_TOPIC, "WRITE"))
    _grant(cluster, grants)
    wait_until(
        "the ACLs in force",
        lambda: (
            ask(cluster, ALICE, wire.metadata(TOPIC))[0].topics[0].error_code == ErrorCode.none
            and ask(cluster, CAROL, wire.metadata(OTHER))[0].topics[0].error_code == ErrorCode.none
        ),
        20,
    )
    before = _state(cluster)
    cells: dict[tuple[int, str], ErrorCode] = {}
    for i, case in enumerate(CASES):
        for user in (BOB, CAROL):
            cells[i, user[0]] = _answer(cluster, user, case)
    # Refused requests changed nothing.
    assert _state(cluster) == before
    for i, case in enumerate(CASES):
        cells[i, ALICE[0]] = _answer(cluster, ALICE, case)
    print("\n" + "\n".join(f"{CASES[i].api_key} {u}: {v.name}" for (i, u), v in cells.items()))
    wrong = [
        (case.api_key, user, cells[i, user].name, want.name)
        for i, case in enumerate(CASES)
        for user, want in ((BOB[0], case.denied), (CAROL[0], case.denied),
                           (ALICE[0], case.allowed))
        if cells[i, user] != want
    ]  # fmt: skip
    assert not wrong, f"(api, principal, answered, Kafka's answer): {wrong}"
    # Alice's allowed requests did their work.
    # Her transaction (its offset of 3 for GROUP included) commits once the markers are in.
    wait_until("the commit", lambda: _state(cluster)["txn"][0][0] == "CompleteCommit", 20)
    after = _state(cluster)
    start, end = after["offsets"]
    assert (start, end) == (1, before["offsets"][1] + 1)
    topics = dict(after["topics"])
    assert NEW_TOPIC in topics and DEL_TOPIC not in topics and len(topics[GROW_TOPIC]) == 2
    assert after["retention"] == ["654321"]
    assert DEL_GROUP not in after["groups"]
    assert after["committed"][0] == [(TOPIC, 0, 3)] and after["committed"][1] == []
    assert SCRAM_USER in [user for user, _ in after["scram"]]
    assert SCRAM_USER not in [user for user, _ in before["scram"]]
    assert after["acls"] == before["acls"]  # alice created one ACL, then deleted it
