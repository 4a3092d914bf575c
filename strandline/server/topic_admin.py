"""Topic administration as any broker serves it (Kafka's ZkAdminManager).

The broker that receives CreateTopics/DeleteTopics/CreatePartitions validates the
request and writes the znodes; the controller, wherever it runs, reacts to the znode
watch and makes the partitions online. The broker then waits until its metadata shows
the result, so the client's next request finds it (DelayedCreatePartitions).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from strandline.controller.assignment import assign_replicas_to_brokers
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zk_retry import zk_request
from strandline.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from strandline.server.config import BrokerConfig
from strandline.server.metadata_cache import MetadataCache
from strandline.server.purgatory import Purgatory
from strandline.storage.config import LogConfig

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_name(name: str) -> None:
    if name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'"
        )


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    num_partitions: int
    replication_factor: int
    topic_id: uuid.UUID | None = None  # None for validate_only


class TopicAdmin:
    def __init__(self, config: BrokerConfig, zk: ZkClient, metadata_cache: MetadataCache) -> None:
        self.config = config
        self.zk = zk
        self.metadata_cache = metadata_cache
        # Woken by the metadata cache's owner whenever partition metadata changes.
        self.metadata_purgatory = Purgatory("TopicMetadata")

    def validate_configs(self, configs: dict[str, str]) -> None:
        LogConfig.from_props(configs)  # raises InvalidConfigError naming the bad key

    def _live_broker_ids(self) -> list[int]:
        return sorted(self.metadata_cache.brokers)

    def _assignment_brokers(self) -> list[int] | dict[int, str | None]:
        """Broker ids, or id -> rack when any broker declares `broker.rack` (rack-aware)."""
        brokers = self.metadata_cache.brokers
        if any(b.rack for b in brokers.values()):
            return {b.broker_id: b.rack for b in brokers.values()}
        return sorted(brokers)

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        timeout_s: float = 30.0,
    ) -> CreatedTopic:
        validate_topic_name(name)
        self.validate_configs(configs)
        if assignment is None:
            if num_partitions == -1:
                num_partitions = self.config.num_partitions
            if replication_factor == -1:
                replication_factor = self.config.default_replication_factor
            if num_partitions <= 0:
                raise InvalidPartitionsError(
                    f"number of partitions must be > 0, got {num_partitions}"
                )
            brokers = self._live_broker_ids()
            if replication_factor <= 0 or replication_factor > len(brokers):
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor} is not in 1..{len(brokers)} "
                    f"(live brokers: {brokers})"
                )
            assignment = assign_replicas_to_brokers(
                self._assignment_brokers(), num_partitions, replication_factor
            )
        else:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError(
                    "give either a replica assignment or num_partitions/replication_factor"
                )
            self._check_manual_assignment(assignment, expected_from=0)
            num_partitions = len(assignment)
            replication_factor = len(next(iter(assignment.values())))
        if name in await zk_request(self.zk.get_topics_marked_for_deletion):
            # Kafka's answer too: the name is taken until every old replica is deleted.
            raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
        if await zk_request(self.zk.get_topic_assignment, name) is not None:
            raise TopicExistsError(f"topic {name!r} already exists")
        topic_id = None
        if not validate_only:
            topic_id = await zk_request(self.zk.create_topic, name, assignment, configs)
            await self._await_partitions(name, num_partitions, timeout_s)
        return CreatedTopic(name, num_partitions, replication_factor, topic_id)

    def _check_manual_assignment(
        self, assignment: dict[int, list[int]], expected_from: int
    ) -> None:
        if sorted(assignment) != list(range(expected_from, expected_from + len(assignment))):
            raise InvalidPartitionsError(
                f"assignment partitions {sorted(assignment)} are not "
                f"consecutive from {expected_from}"
            )
        sizes = {len(replicas) for replicas in assignment.values()}
        if len(sizes) != 1:
            raise InvalidReplicationFactorError(
                "every partition must have the same replication factor"
            )
        live = set(self.metadata_cache.brokers)
        for p, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                raise InvalidRequestError(f"partition {p}: duplicate replicas {replicas}")
            unknown = set(replicas) - live
            if unknown:
                raise InvalidRequestError(f"partition {p}: unknown brokers {sorted(unknown)}")

    async def _await_partitions(self, name: str, count: int, timeout_s: float) -> None:
        def ready(_key: object) -> bool:
            parts = self.metadata_cache.topics.get(name, {})
            return len(parts) >= count and all(p.leader >= 0 for p in parts.values())

        await self.metadata_purgatory.wait([name], ready, timeout_s)

    async def delete_topic(self, name: str, timeout_s: float = 30.0) -> None:
        if not self.config.delete_topic_enable:
            raise InvalidRequestError("topic deletion is disabled (delete.topic.enable=false)")
        if await zk_request(self.zk.get_topic_assignment, name) is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        await zk_request(self.zk.mark_topic_for_deletion, name)
        await self.metadata_purgatory.wait(
            [name], lambda _key: not self.metadata_cache.has_topic(name), timeout_s
        )

    async def create_partitions(
        self,
        name: str,
        count: int,
        new_assignments: list[list[int]] | None,
        validate_only: bool,
        timeout_s: float = 30.0,
    ) -> None:
        current = await zk_request(self.zk.get_topic_assignment, name)
        if current is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        existing = len(current)
        if count <= existing:
            raise InvalidPartitionsError(
                f"topic {name!r} has {existing} partitions; the new count {count} must be larger"
            )
        rf = len(current[0])
        if new_assignments is not None:
            if len(new_assignments) != count - existing:
                raise InvalidPartitionsError(
                    f"{len(new_assignments)} assignments given for "
                    f"{count - existing} new partitions"
                )
            added = {existing + i: list(r) for i, r in enumerate(new_assignments)}
            self._check_manual_assignment({**added}, expected_from=existing)
        else:
            brokers = self._live_broker_ids()
            if rf > len(brokers):
                raise InvalidReplicationFactorError(
                    f"replication factor {rf} exceeds the {len(brokers)} live brokers"
                )
            added = assign_replicas_to_brokers(
                self._assignment_brokers(), count - existing, rf, start_partition_id=existing
            )
        if validate_only:
            return
        await zk_request(self.zk.set_topic_assignment, name, {**current, **added})
        await self._await_partitions(name, count, timeout_s)

    async def alter_topic_config(self, name: str, configs: dict[str, str]) -> None:
        self.validate_configs(configs)
        await zk_request(self.zk.set_topic_config, name, configs)
