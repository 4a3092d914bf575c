"""The admin tools in the whole-cluster simulator: kafka-topics.sh --create and
--delete, kafka-reassign-partitions.sh --execute and kafka-preferred-replica-election.sh,
each a write to ZooKeeper on the simulator's own session (the controller does the rest).
"""

from __future__ import annotations

from strandline.sim.cluster_events import CreateTopic, DeleteTopic, PreferredElection, Reassign
from strandline.sim.cluster_state import ClusterState
from strandline.sim.zookeeper import ZkError
from strandline.types import TopicPartition


def create_topic(cluster: ClusterState, event: CreateTopic) -> None:
    """kafka-topics.sh --create: replicas spread round-robin over the registered
    brokers, written to /brokers/topics/<t> (the controller does the rest)."""
    live = sorted(cluster.admin.get_live_brokers())
    if len(live) < event.replication_factor or event.topic in cluster.admin.get_all_topics():
        cluster.note(f"create {event.topic} refused")
        return
    assignment = {
        p: [live[(p + i) % len(live)] for i in range(event.replication_factor)]
        for p in range(event.partitions)
    }
    cluster.admin.create_topic(event.topic, assignment)
    cluster.incarnations[event.topic] = cluster.incarnation_of(event.topic) + 1
    cluster.note(f"topic {event.topic} created with assignment {assignment}")


def delete_topic(cluster: ClusterState, event: DeleteTopic) -> None:
    if event.topic in cluster.admin.get_all_topics():
        cluster.admin.mark_topic_for_deletion(event.topic)
        cluster.note(f"topic {event.topic} marked for deletion")


def reassign(cluster: ClusterState, event: Reassign) -> None:
    tp = TopicPartition(event.topic, event.partition)
    assignment = cluster.admin.get_topic_assignment(event.topic)
    if assignment is None or event.partition not in assignment:
        return
    if event.topic in cluster.admin.get_topics_marked_for_deletion():
        return
    try:
        cluster.admin.create_partition_reassignment({tp: list(event.target)})
    except ZkError:
        cluster.note("reassignment refused: one is in progress")
        return
    key = (event.topic, cluster.incarnation_of(event.topic), event.partition)
    cluster.books.reassignments[key] = tuple(event.target)
    cluster.note(f"/admin/reassign_partitions := {{{tp}: {list(event.target)}}}")


def preferred_election(cluster: ClusterState, event: PreferredElection) -> None:
    tp = TopicPartition(event.topic, event.partition)
    try:
        cluster.admin.create_preferred_replica_election([tp])
    except ZkError:
        return
