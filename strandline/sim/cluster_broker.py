"""The simulated broker's side of controller requests: LeaderAndIsr (make leader, make
follower), UpdateMetadata and StopReplica, behind the controller fencing.

As `server/broker.py` and `server/replica_manager.py` apply them, through the same
rules: `replication/controller_fencing.py` refuses a stale controller or broker epoch,
`replication/leader_and_isr.py` decides each partition's role and its start. This
module is the simulated I/O; the books note who led each epoch and any request applied
out of controller-epoch order.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strandline.controller import effects as fx
from strandline.protocol.controller_requests import LeaderAndIsrRequest, UpdateMetadataRequest
from strandline.replication import controller_fencing, leader_and_isr
from strandline.sim.cluster_datapath import fail_waiting
from strandline.sim.cluster_state import ClusterReplica, ClusterState, Message, SimBroker
from strandline.types import TopicPartition


def apply_request(
    cluster: ClusterState, controller: SimBroker, broker: SimBroker, message: Message
) -> None:
    request = message.request
    error = controller_fencing.controller_request_error(
        request.controller_epoch,
        broker.controller_epoch,
        request.broker_epoch,
        broker.broker_epoch,
    )
    kind = type(request).__name__
    if error is not None:
        cluster.books.fenced_requests += 1
        cluster.log(
            broker.broker_id,
            "rejected-stale-controller"
            if error == ErrorCode.stale_controller_epoch
            else "rejected-stale-broker-epoch",
            request=kind,
            controller=request.controller_id,
            controller_epoch=request.controller_epoch,
            current=broker.controller_epoch,
        )
    else:
        broker.controller_epoch = max(broker.controller_epoch, request.controller_epoch)
        if request.controller_epoch < broker.applied_controller_epoch:
            cluster.books.problems.append(
                f"broker {broker.broker_id} applied a {kind} of controller epoch "
                f"{request.controller_epoch} after one of epoch "
                f"{broker.applied_controller_epoch}"
            )
        broker.applied_controller_epoch = max(
            broker.applied_controller_epoch, request.controller_epoch
        )
        if isinstance(request, LeaderAndIsrRequest):
            _leader_and_isr(cluster, broker, request)
        elif isinstance(request, UpdateMetadataRequest):
            _update_metadata(broker, request)
        else:
            for tp in request.partitions:
                _stop_replica(cluster, broker, tp, request.delete_partitions)
    if message.deleting is not None:
        # The answer goes back to the controller process that asked, if it still runs.
        shell = controller.shell
        if controller.alive and shell is not None:
            shell.events.append(
                fx.StopReplicaAnswered(message.deleting, broker.broker_id, error or ErrorCode.none)
            )


def _leader_and_isr(cluster: ClusterState, broker: SimBroker, request: LeaderAndIsrRequest) -> None:
    """ReplicaManager.become_leader_or_follower: the decisions are
    `replication/leader_and_isr.py`'s, as the broker's; this is the simulated I/O."""
    for state in request.partitions:
        tp = state.tp
        replica = broker.replicas.get(tp)
        current = replica.leader_epoch if replica is not None and replica.hosted else None
        error, leads = leader_and_isr.decide(
            broker.broker_id, state.leader, state.replicas, state.leader_epoch, current
        )
        if error is not None:
            continue
        if replica is None:
            replica = ClusterReplica(
                broker.broker_id, cluster.config.truncation, tp, cluster.incarnation_of(tp.topic)
            )
            broker.replicas[tp] = replica
        replica.hosted = True
        replica.leader = state.leader
        replica.leader_epoch = state.leader_epoch
        replica.isr = state.isr
        replica.assigned = state.replicas
        replica.zk_version = state.zk_version
        replica.controller_epoch = state.controller_epoch
        if leads:
            _make_leader(cluster, broker, replica)
        else:
            _make_follower(cluster, replica)


def _make_leader(cluster: ClusterState, broker: SimBroker, replica: ClusterReplica) -> None:
    tp = replica.tp
    key = (tp.topic, replica.incarnation, tp.partition, replica.leader_epoch)
    previous = cluster.books.leaders.setdefault(key, broker.broker_id)
    if previous != broker.broker_id:
        cluster.books.problems.append(
            f"{tp} leader epoch {replica.leader_epoch}: both broker {previous} and "
            f"broker {broker.broker_id} led it"
        )
    fail_waiting(cluster, replica, "NOT_LEADER_OR_FOLLOWER")
    replica.held_response = None
    start = leader_and_isr.become_leader(
        broker.broker_id,
        replica.leader_epoch,
        replica.isr,
        replica.assigned,
        replica.log_end_offset,
        replica.high_watermark,
        cluster.config.replica_lag_time_max_ms,
        cluster.now_ms,
    )
    replica.epoch_cache.assign(*start.epoch_start)
    replica.partition = start.partition
    replica.high_watermark = start.partition.high_watermark
    cluster.note(
        f"broker {broker.broker_id} leads {tp} in epoch {replica.leader_epoch}, "
        f"ISR {list(replica.isr)}"
    )


def _make_follower(cluster: ClusterState, replica: ClusterReplica) -> None:
    start = leader_and_isr.become_follower(
        cluster.config.truncation,
        replica.leader,
        replica.leader_epoch,
        replica.log_end_offset,
        replica.high_watermark,
        replica.partition,
    )
    replica.high_watermark = start.high_watermark
    replica.partition = None
    fail_waiting(cluster, replica, "NOT_LEADER_OR_FOLLOWER")
    if start.truncate_to is not None:
        replica.truncate_to(start.truncate_to)
    replica.follower = start.follower
    replica.held_response = None


def _update_metadata(broker: SimBroker, request: UpdateMetadataRequest) -> None:
    broker.metadata_controller = request.controller_id
    for state in request.partitions:
        broker.metadata[state.tp] = state
    if request.deleted_topics:
        gone = set(request.deleted_topics)
        for tp in [tp for tp in broker.metadata if tp.topic in gone]:
            del broker.metadata[tp]


def _stop_replica(
    cluster: ClusterState, broker: SimBroker, tp: TopicPartition, delete: bool
) -> None:
    replica = broker.replicas.get(tp)
    if replica is None:
        return
    fail_waiting(cluster, replica, "NOT_LEADER_OR_FOLLOWER")
    if delete:
        del broker.replicas[tp]
        cluster.note(f"broker {broker.broker_id} deletes its replica of {tp}")
    else:
        replica.hosted = False
        replica.partition = None
        replica.leader_epoch = -1
