"""The whole-cluster simulator's data path: produce and acknowledgement, the follower
fetch rounds, the leader's ISR writes (shrink on expiration, expand on catch-up) and
the high-watermark checkpoint.

As `server/replica_manager.py` does, every decision comes from `strandline.replication`
(the leader's `Partition`, the follower's `FollowerState`, `isr_update`, truncation);
this module is the simulated I/O around them. The acks and failed produces go to the
books (`ClusterState.books`) for the invariants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.replication import isr_update
from strandline.replication.follower import FetchState, follower_high_watermark
from strandline.replication.truncation import EpochEndOffset, truncation_on_offset_out_of_range
from strandline.sim.cluster_events import Produce
from strandline.sim.cluster_state import (
    NO_LEADER,
    AckedWrite,
    ClusterReplica,
    ClusterState,
    SimBroker,
)
from strandline.sim.zookeeper import classify_sim_failure
from strandline.types import TopicPartition


def fail_waiting(cluster: ClusterState, replica: ClusterReplica, error: str) -> None:
    if replica.waiting:
        for _offset, value, _epoch in replica.waiting:
            cluster.books.failed_produces.append((value, error))
        replica.waiting = []


def produce(cluster: ClusterState, event: Produce) -> None:
    tp = TopicPartition(event.topic, event.partition)
    meta = None
    # As a client with a bootstrap list: `via` first, then any other live broker
    # that knows the partition (a restarted broker's metadata is empty until the
    # controller's UpdateMetadata arrives).
    for broker_id in [event.via, *sorted(b for b in cluster.brokers if b != event.via)]:
        via = cluster.brokers.get(broker_id)
        if via is not None and via.alive and via.metadata.get(tp) is not None:
            meta = via.metadata[tp]
            break
    if meta is None or meta.leader == NO_LEADER:
        cluster.books.failed_produces.append((event.value, "UNKNOWN_TOPIC_OR_PARTITION"))
        return
    leader = cluster.brokers[meta.leader]
    replica = leader.replicas.get(tp) if leader.alive else None
    partition = replica.partition if replica is not None else None
    if replica is None or partition is None:
        cluster.books.failed_produces.append((event.value, "NOT_LEADER_OR_FOLLOWER"))
        return
    acks = -1 if event.acks_all else 1
    error = partition.check_produce(acks, cluster.config.min_insync_replicas)
    if error != ErrorCode.none:
        cluster.books.failed_produces.append((event.value, error.name))
        cluster.note(f"{event.value} refused: {error.name}")
        return
    offset = replica.log_end_offset
    epoch = replica.leader_epoch
    replica.epochs.append(epoch)
    replica.values.append(event.value)
    cluster.note(f"broker {leader.broker_id} appends {event.value} to {tp} at offset {offset}")
    if event.acks_all:
        replica.waiting.append((offset, event.value, epoch))
    else:
        _ack(cluster, leader, replica, offset, event.value, epoch, acks_all=False)
    _hw_moved(cluster, leader, replica, partition.on_append(replica.log_end_offset, cluster.now_ms))


def _ack(
    cluster: ClusterState,
    leader: SimBroker,
    replica: ClusterReplica,
    offset: int,
    value: str,
    epoch: int,
    acks_all: bool,
) -> None:
    assert replica.partition is not None
    isr = replica.partition.isr
    if acks_all:
        _check_isr_against_zookeeper(cluster, leader, replica, offset)
    holders = []
    for broker_id in sorted(isr):
        other = cluster.brokers[broker_id].replicas.get(replica.tp)
        if (
            other is not None
            and other.log_end_offset > offset
            and other.values[offset] == value
            and other.epochs[offset] == epoch
        ):
            holders.append(broker_id)
    cluster.books.acked.append(
        AckedWrite(
            replica.tp,
            replica.incarnation,
            offset,
            value,
            epoch,
            acks_all,
            leader.broker_id,
            isr,
            frozenset(holders),
            replica.tp.topic in cluster.admin.get_topics_marked_for_deletion(),
        )
    )


def _check_isr_against_zookeeper(
    cluster: ClusterState, leader: SimBroker, replica: ClusterReplica, offset: int
) -> None:
    """Every replica in ZooKeeper's ISR of this leader's term can be elected
    cleanly, so the leader must wait for it: whenever it acknowledges a write,
    ZooKeeper's ISR is within the leader's ISR (not only its maximal ISR, which a
    follower still fetching keeps re-entering: the divergence must not hide until
    that follower stalls)."""
    assert replica.partition is not None
    found = cluster.admin.get_partition_state(replica.tp)
    if found is None:
        return
    state = found[0]
    if state.leader != leader.broker_id or state.leader_epoch != replica.leader_epoch:
        return  # a newer decision; the LeaderAndIsr carrying it is on its way
    outside = set(state.isr) - replica.partition.isr
    if outside:
        cluster.books.problems.append(
            f"{replica.tp}: leader {leader.broker_id} acknowledged offset {offset} "
            f"with ISR {sorted(replica.partition.isr)} while ZooKeeper's ISR is "
            f"{list(state.isr)} ({sorted(outside)} could be elected without it)"
        )


def _hw_moved(
    cluster: ClusterState, broker: SimBroker, replica: ClusterReplica, advanced: int | None
) -> None:
    if advanced is None:
        return
    replica.high_watermark = advanced
    partition = replica.partition
    if not replica.waiting or partition is None:
        return
    still = []
    for offset, value, epoch in replica.waiting:
        answer = partition.produce_completion(offset, cluster.config.min_insync_replicas)
        if answer is None:
            still.append((offset, value, epoch))
        elif answer == ErrorCode.none:
            _ack(cluster, broker, replica, offset, value, epoch, acks_all=True)
            cluster.note(f"{value} acknowledged (acks=all) at offset {offset}")
        else:
            cluster.books.failed_produces.append((value, answer.name))
    replica.waiting = still


def _write_isr(
    cluster: ClusterState, broker: SimBroker, replica: ClusterReplica, new_isr: frozenset[int]
) -> None:
    """The leader's ISR update, the broker's own (`replication/isr_update.py`),
    carried out on this broker's ZooKeeper session."""
    partition = replica.partition
    assert partition is not None and broker.zk is not None
    old_isr = partition.isr
    update = isr_update.isr_update(
        replica.tp,
        broker.broker_id,
        replica.leader_epoch,
        replica.controller_epoch,
        replica.zk_version,
        old_isr,
        new_isr,
    )
    result: isr_update.IsrUpdateResult = isr_update.run(update, _isr_effect(broker))
    replica.zk_version = result.zk_version
    replica.isr = tuple(sorted(result.isr))
    replica.notify_pending = result.notify_pending
    cluster.log(
        broker.broker_id,
        "isr-change" if result.known else f"isr-change-{result.outcome.value}",
        tp=replica.tp,
        old_isr=sorted(old_isr),
        proposed=sorted(new_isr),
        new_isr=list(replica.isr),
        zk_version=result.zk_version,
    )
    _hw_moved(cluster, broker, replica, partition.apply_isr(result.isr, cluster.now_ms))


def _isr_effect(broker: SimBroker) -> Callable[[isr_update.IsrEffect], Any]:
    def perform_one(effect: isr_update.IsrEffect) -> Any:
        zk = broker.zk
        assert zk is not None
        return isr_update.perform(effect, zk, classify_sim_failure)

    return perform_one


def _notify_pending(broker: SimBroker) -> None:
    """ISR change notifications left pending are sent again (the broker's periodic
    ISR check does the same)."""
    for tp in sorted(broker.replicas):
        replica = broker.replicas[tp]
        if replica.notify_pending and replica.partition is not None:
            replica.notify_pending = isr_update.run(
                isr_update.notify_again(tp), _isr_effect(broker)
            )


def isr_expiration(cluster: ClusterState) -> None:
    for broker in cluster.brokers.values():
        if not broker.alive:
            continue
        for tp in sorted(broker.replicas):
            replica = broker.replicas[tp]
            partition = replica.partition
            if partition is None:
                continue
            proposal = partition.isr_shrink_proposal(cluster.now_ms)
            if proposal is not None:
                _write_isr(cluster, broker, replica, proposal)
            elif (expansion := partition.isr_expansion()) is not None:
                # As the broker's periodic check: an expansion not written before
                # (a lost reply left the ISR unknown) is proposed again.
                _write_isr(cluster, broker, replica, expansion)
        _notify_pending(broker)


def checkpoint_high_watermarks(cluster: ClusterState, force: bool = False) -> None:
    """As the broker's tick loop: every hw_checkpoint_interval_ms, each live broker
    writes the HW of every replica it holds."""
    for broker in cluster.brokers.values():
        if not broker.alive:
            continue
        if not force and (
            cluster.now_ms - broker.hw_checkpointed_at_ms < cluster.config.hw_checkpoint_interval_ms
        ):
            continue
        broker.hw_checkpointed_at_ms = cluster.now_ms
        for replica in broker.replicas.values():
            replica.checkpointed_hw = replica.high_watermark


def fetch_round(cluster: ClusterState, broker: SimBroker, lose: bool) -> bool:
    """One fetcher round trip for every partition the broker follows."""
    if not broker.alive or cluster.now_ms < broker.fetch_paused_until_ms:
        return False
    moved = False
    for tp in sorted(broker.replicas):
        follower = broker.replicas[tp]
        if not follower.hosted or follower.partition is not None:
            continue
        if follower.leader == NO_LEADER or follower.leader == broker.broker_id:
            continue
        leader_broker = cluster.brokers[follower.leader]
        if not leader_broker.alive:
            continue
        leader = leader_broker.replicas.get(tp)
        # KIP-320: a fetch names the leader epoch it expects; any other answers
        # FENCED/UNKNOWN_LEADER_EPOCH or NOT_LEADER and the follower waits.
        if (
            leader is None
            or leader.partition is None
            or leader.leader_epoch != follower.leader_epoch
        ):
            continue
        if _fetch_one(cluster, leader_broker, leader, follower, lose):
            moved = True
    return moved


def _fetch_one(
    cluster: ClusterState,
    leader_broker: SimBroker,
    leader: ClusterReplica,
    follower: ClusterReplica,
    lose: bool,
) -> bool:
    state = follower.follower
    if state.fetch_state is FetchState.TRUNCATING:
        if lose:
            return False
        answer = EpochEndOffset(
            *leader.epoch_cache.end_offset_for(
                follower.epoch_cache.latest_epoch, leader.log_end_offset
            )
        )
        decision = state.on_epoch_answer(
            follower.epoch_cache, follower.log_end_offset, follower.high_watermark, answer
        )
        follower.truncate_to(decision.offset)
        return True
    partition = leader.partition
    assert partition is not None
    fetch_offset = follower.log_end_offset
    if fetch_offset > leader.log_end_offset:
        if not lose:
            cut, _next = truncation_on_offset_out_of_range(
                follower.log_end_offset, 0, leader.log_end_offset
            )
            follower.truncate_to(cut)
        return True
    outcome = partition.on_follower_fetch(follower.broker_id, fetch_offset, cluster.now_ms)
    epochs = leader.epochs[fetch_offset:]
    values = leader.values[fetch_offset:]
    leader_epoch = leader.leader_epoch
    _hw_moved(cluster, leader_broker, leader, outcome.high_watermark_advanced)
    if outcome.isr_expand is not None:
        _write_isr(cluster, leader_broker, leader, outcome.isr_expand)
    if lose:
        return True
    if not state.accepts_fetch_response(fetch_offset, leader_epoch, follower.log_end_offset):
        return True
    if values:
        follower.append(epochs, values)
    follower.high_watermark = follower_high_watermark(
        follower.log_end_offset, outcome.response_high_watermark
    )
    return bool(values) or outcome.high_watermark_advanced is not None
