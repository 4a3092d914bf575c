"""What a request handler may use of the broker (the shell's services)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from strandline.controller.channel import ControllerRequest
    from strandline.controller.controller import Controller
    from strandline.security.acl_cache import AclCache
    from strandline.security.authorizer import Authorizer
    from strandline.security.credentials import CredentialCache
    from strandline.server.config import BrokerConfig
    from strandline.server.group_service import GroupService
    from strandline.server.metadata_cache import MetadataCache
    from strandline.server.metrics import NoMetrics
    from strandline.server.producer_ids import ProducerIdManager
    from strandline.server.replica_manager import ReplicaManager
    from strandline.server.topic_admin import TopicAdmin
    from strandline.server.topic_configs import TopicConfigs
    from strandline.server.txn_service import TxnService


class BrokerContext(Protocol):
    config: BrokerConfig
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    topic_admin: TopicAdmin
    topic_configs: TopicConfigs
    producer_ids: ProducerIdManager
    group_service: GroupService
    txn_service: TxnService  # the transaction coordinator
    metrics: NoMetrics  # or BrokerMetrics, when metrics.port is set
    authorizer: Authorizer | None  # None: no authorizer.class.name, everything allowed
    acl_cache: AclCache | None  # with an authorizer: ACLs from ZooKeeper, kept current
    credentials: CredentialCache  # SCRAM credentials from ZooKeeper, kept current

    controller: Controller

    def now_ms(self) -> int: ...

    async def apply_controller_request(self, request: ControllerRequest) -> object: ...
