"""Carry out the controller's ZooKeeper effects on a client.

Every write is fenced by the controller epoch (one ZooKeeper multi-op whose first op
checks /controller_epoch's version): a controller that lost its election without
knowing it yet cannot change anything. The same function serves the real broker (a
`ZkClient` over kazoo, called on a worker thread) and the simulator
(`strandline.sim.zk_client.SimZkClient`), so both run the same reads and conditional
writes for the same effects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import ConnectionLoss as KazooConnectionLoss

from strandline.controller import effects as fx
from strandline.coordination import znodes
from strandline.coordination.errors import ControllerMovedError, ZkVersionConflictError
from strandline.coordination.zk_ops import CreateWrite, DeleteWrite, SetWrite, ZkWrite
from strandline.coordination.zookeeper_client import ControllerZk
from strandline.types import TopicPartition


def perform(effect: fx.ZkEffect, zk: ControllerZk) -> Any:
    """Run one ZooKeeper effect; returns what the procedure expects back."""
    match effect:
        case fx.ReadController():
            return zk.get_controller()
        case fx.ElectController(broker_id):
            return _elect(zk, broker_id)
        case fx.ResignController(broker_id):
            return zk.resign_controller(broker_id)
        case fx.ReadLiveBrokers():
            return zk.get_live_brokers()
        case fx.ReadTopics():
            return zk.get_all_topics()
        case fx.ReadAssignment(topic):
            return zk.get_topic_assignment(topic)
        case fx.LoadTopic(topic):
            return _load_topic(zk, topic)
        case fx.WriteAssignment(topic, assignment, topic_id):
            path = znodes.topic_path(topic)

            def write() -> list[ZkWrite]:
                known = topic_id
                if known is None:  # keep whatever id the znode holds
                    found = zk.get_topic_znode(topic)
                    known = None if found is None else found[1]
                return [SetWrite(path, znodes.encode_topic_assignment(assignment, known))]

            return _fenced(zk, write)
        case fx.ReadPartitionStates(tps):
            return zk.get_partition_states(tps)
        case fx.WritePartitionStates(creates, updates):
            results: dict[TopicPartition, int | Exception] = {}
            if creates:
                results.update(zk.create_partition_states(creates, True))
            if updates:
                results.update(zk.update_partition_states(updates, True))
            moved = [r for r in results.values() if isinstance(r, ControllerMovedError)]
            if moved:
                raise moved[0]  # the procedure ends: we are no longer the controller
            return results
        case fx.ReadTopicsToDelete():
            return zk.get_topics_marked_for_deletion()
        case fx.DeleteTopicZnodes(topic):
            roots = (
                znodes.topic_path(topic),
                znodes.topic_config_path(topic),
                znodes.delete_topic_path(topic),
            )
            return _fenced(zk, lambda: [w for root in roots for w in _delete_tree(zk, root)])
        case fx.ReadIsrChangeNotifications():
            return zk.get_isr_change_notifications()
        case fx.DeleteIsrChangeNotifications(names):
            parent = znodes.ISR_CHANGE_NOTIFICATION_PATH

            def existing() -> list[ZkWrite]:
                present = set(zk.children_or_none(parent) or ())
                return [DeleteWrite(f"{parent}/{n}") for n in names if n in present]

            return _fenced(zk, existing)
        case fx.ReadPreferredElection():
            return zk.get_preferred_replica_election()
        case fx.DeletePreferredElection(handled):
            path = znodes.PREFERRED_REPLICA_ELECTION_PATH

            def rest() -> list[ZkWrite]:
                # Read again at write time: a tool may have added partitions since.
                left = (
                    []
                    if handled is None
                    else [tp for tp in zk.get_preferred_replica_election() if tp not in handled]
                )
                if not left:
                    return _delete_tree(zk, path)
                return [SetWrite(path, znodes.encode_preferred_replica_election(sorted(left)))]

            return _fenced(zk, rest)
        case fx.ReadReassignment():
            return zk.get_partition_reassignment()
        case fx.WriteReassignment(reassignment):
            path = znodes.REASSIGN_PARTITIONS_PATH
            if not reassignment:
                return _fenced(zk, lambda: _delete_tree(zk, path))
            data = znodes.encode_reassignment(reassignment)
            return _fenced(
                zk,
                lambda: [
                    CreateWrite(path, data)
                    if zk.children_or_none(path) is None
                    else SetWrite(path, data)
                ],
            )
    raise TypeError(f"not a ZooKeeper effect: {effect!r}")


def _load_topic(zk: ControllerZk, topic: str) -> tuple[dict[int, list[int]], uuid.UUID] | None:
    """The topic's assignment and id; one without an id gets a new one, written
    conditionally on the version read (a tool rewriting the znode meanwhile means
    reading again) and fenced by our controller epoch (KafkaController's setTopicIds)."""
    for attempt in range(3):
        found = zk.get_topic_znode(topic)
        if found is None:
            return None
        assignment, topic_id, version = found
        if topic_id is not None:
            return assignment, topic_id
        new_id = zk.new_topic_id(topic)
        data = znodes.encode_topic_assignment(assignment, new_id)
        try:
            zk.fenced_multi([SetWrite(znodes.topic_path(topic), data, version)])
        except ZkVersionConflictError:
            if attempt == 2:
                raise
            continue
        return assignment, new_id
    return None


def _elect(zk: ControllerZk, broker_id: int) -> int | None:
    """try_elect_controller; when its reply is lost, /controller tells whether the
    election multi was applied (Kafka's checked ephemeral create): holding it without
    knowing would leave the cluster without an active controller until our session
    ends. Not applied: the election is tried once more."""
    for attempt in range(2):
        try:
            return zk.try_elect_controller(broker_id)
        except KazooConnectionLoss:
            if zk.get_controller() == broker_id:
                found = zk.get_controller_epoch()
                if found is None:
                    raise
                epoch, version = found
                zk.controller_epoch_zk_version = version
                return epoch
            if attempt == 1 or zk.get_controller() is not None:
                raise
    return None


def _fenced(zk: ControllerZk, writes: Callable[[], list[ZkWrite]]) -> None:
    """Commit the writes behind the controller-epoch check. A znode that appeared or
    vanished between reading and writing (another writer: a tool, a broker) means the
    writes are built again from a fresh read; a moved controller epoch raises
    ControllerMovedError, which ends the procedure."""
    for attempt in range(3):
        try:
            zk.fenced_multi(writes())
            return
        except ZkVersionConflictError:
            if attempt == 2:
                raise


def _delete_tree(zk: ControllerZk, root: str) -> list[ZkWrite]:
    """Deletes for `root` and everything under it, children first; none if absent."""
    children = zk.children_or_none(root)
    if children is None:
        return []
    deletes: list[ZkWrite] = []
    for child in children:
        deletes += _delete_tree(zk, f"{root}/{child}")
    return [*deletes, DeleteWrite(root)]
