"""Authorized operations (KIP-430) computed from the ACLs, against a
SASL_SSL broker with the ACL authorizer (`allow.everyone.if.no.acl.found=false`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from strandline.security.acl import AclOperation
from tests.security.test_hardening import ALICE, BOB, admin_of, ask, grant
from tests.security.test_secured_cluster import add_users, create_topic

if TYPE_CHECKING:
    from tests.conftest import ClusterFactory

TOPIC = "ao-t"


def bits(*ops: AclOperation) -> int:
    return sum(1 << op.value for op in ops)


def _metadata() -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(TOPIC)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )


def test_authorized_operations_follow_the_acls(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(1, security="sasl_ssl")
    add_users(cluster, dict([ALICE, BOB]))
    create_topic(cluster, TOPIC, [[1]])
    grant(cluster, ALICE[0], TOPIC, "READ", "WRITE")

    (meta, described) = ask(
        cluster,
        ALICE,
        _metadata(),
        DescribeClusterRequest(include_cluster_authorized_operations=True),
    )
    # READ and WRITE imply DESCRIBE (Kafka's authorizer); nothing on the cluster.
    assert meta.topics[0].topic_authorized_operations == bits(
        AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
    )
    assert described.cluster_authorized_operations == 0

    # bob may not describe the topic: it is answered TOPIC_AUTHORIZATION_FAILED, with no
    # operation allowed.
    (meta,) = ask(cluster, BOB, _metadata())
    assert meta.topics[0].topic_authorized_operations == 0

    # The super user may do everything each resource supports.
    (meta, described) = ask(
        cluster,
        admin_of(cluster),
        _metadata(),
        DescribeClusterRequest(include_cluster_authorized_operations=True),
    )
    assert meta.topics[0].topic_authorized_operations == bits(
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    )
    assert described.cluster_authorized_operations == bits(
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    )
