"""The whole-cluster simulator's invariants, checked after every step and at settle.

Each is a promise of the ZooKeeper-era design (docs/replication.md) or of Kafka's replication
guarantee, stated over what the simulator can observe: ZooKeeper's znodes, every
broker's logs and roles, the acknowledgements producers got, and the state-change log.

- at most one leader per partition per leader epoch, across all brokers and time;
- the leader in a partition's state znode is in its ISR, unless the state-change log
  records an unclean election for it;
- the controller epoch never goes back: in /controller_epoch, in each partition state
  znode's controller_epoch, and in the requests each broker process applies;
- every requested reassignment either still runs (/admin/reassign_partitions or a
  controller's context) or ended with the assignment equal to its target (RAR);
- an acks=all write is acknowledged only while at least min.insync.replicas ISR
  members hold it;
- HW <= LEO on every replica, and replicas agree on every offset below both HWs;
- a topic whose deletion completed has no replica left on any live broker;
- a topic's id (KIP-516, in its znode) never changes while it lives, and a topic
  created again under the same name never gets an earlier incarnation's id;
- at settle: every acks=all acknowledged write is in the final leader's log at its
  offset (clean elections only).

Whether the cluster became quiescent at settle (every reassignment and deletion done,
every replica in sync) is a liveness question, reported apart (`CheckedRun.stuck`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import NamedTuple

from strandline.coordination import znodes
from strandline.sim.cluster import ClusterSim
from strandline.sim.cluster_events import ClusterEvent
from strandline.sim.cluster_state import NO_LEADER, ClusterReplica
from strandline.sim.zookeeper import NoNode
from strandline.types import TopicPartition


class ClusterChecker:
    """Checks one ClusterSim run; keeps what it saw to judge "never goes back"."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        self.controller_epoch = 0
        # (topic, incarnation, partition) -> (controller epoch, leader epoch) last seen.
        self.partition_epochs: dict[tuple[str, int, int], tuple[int, int]] = {}
        self.last_zxid = -1
        self.problems_seen = 0
        self.acked_seen = 0
        self.state_changes_seen = 0
        # (topic, incarnation) -> the topic id its znode held.
        self.topic_ids: dict[tuple[str, int], uuid.UUID] = {}

    # -- after every step ---------------------------------------------------------------

    def check_step(self) -> list[str]:
        sim = self.sim
        out: list[str] = []
        books = sim.books
        if len(books.problems) > self.problems_seen:
            out += books.problems[self.problems_seen :]
            self.problems_seen = len(books.problems)
        self._scan_state_changes()
        if sim.zk.zxid != self.last_zxid:
            self.last_zxid = sim.zk.zxid
            out += self._check_znodes()
        out += self._check_reassignments()
        out += self._check_acks()
        out += self._check_replicas()
        return out

    def _scan_state_changes(self) -> None:
        books = self.sim.books
        lines = books.state_changes
        for line in lines[self.state_changes_seen :]:
            if line.kind == "reassignment-rejected":
                tp = line.fields["tp"]
                key = (tp.topic, self.sim.incarnation_of(tp.topic), tp.partition)
                books.reassignments.pop(key, None)
        self.state_changes_seen = len(lines)

    def _check_znodes(self) -> list[str]:
        sim = self.sim
        zk = sim.zk
        out: list[str] = []
        try:
            data, _ = zk.get(znodes.CONTROLLER_EPOCH_PATH)
            epoch = znodes.decode_controller_epoch(data)
        except NoNode:
            epoch = 0
        if epoch < self.controller_epoch:
            out.append(f"/controller_epoch went back from {self.controller_epoch} to {epoch}")
        self.controller_epoch = max(self.controller_epoch, epoch)
        for topic in zk.get_children(znodes.BROKER_TOPICS_PATH):
            incarnation = sim.incarnation_of(topic)
            out += self._check_topic_id(topic, incarnation)
            try:
                partitions = zk.get_children(znodes.topic_partitions_path(topic))
            except NoNode:
                continue
            for name in partitions:
                tp = TopicPartition(topic, int(name))
                try:
                    raw, _ = zk.get(znodes.partition_state_path(tp))
                except NoNode:
                    continue
                state = znodes.decode_leader_and_isr(raw)
                key = (topic, incarnation, tp.partition)
                if (
                    state.leader != NO_LEADER
                    and state.leader not in state.isr
                    and key not in sim.books.unclean
                ):
                    out.append(
                        f"{tp}: leader {state.leader} is not in its ISR {list(state.isr)} "
                        "and no unclean election is logged"
                    )
                previous = self.partition_epochs.get(key)
                now = (state.controller_epoch, state.leader_epoch)
                if previous is not None:
                    if now[0] < previous[0]:
                        out.append(
                            f"{tp}: the state znode's controller epoch went back from "
                            f"{previous[0]} to {now[0]}"
                        )
                    if now[1] < previous[1]:
                        out.append(
                            f"{tp}: the state znode's leader epoch went back from "
                            f"{previous[1]} to {now[1]}"
                        )
                self.partition_epochs[key] = now
        return out

    def _check_topic_id(self, topic: str, incarnation: int) -> list[str]:
        try:
            raw, _ = self.sim.zk.get(znodes.topic_path(topic))
        except NoNode:
            return []
        topic_id = znodes.decode_topic_id(raw)
        key = (topic, incarnation)
        known = self.topic_ids.get(key)
        if topic_id is None:
            # Created without one, the controller assigns it when it loads it; but an
            # id once written is never dropped (a rewrite of the assignment keeps it).
            return [] if known is None else [f"{topic}: topic id {known} was dropped"]
        if known is None:
            self.topic_ids[key] = topic_id
            reused = [k for k, v in self.topic_ids.items() if v == topic_id and k != key]
            return [f"{topic}: id {topic_id} reused from incarnation {k[1]}" for k in reused]
        if known != topic_id:
            return [f"{topic}: topic id changed from {known} to {topic_id}"]
        return []

    def _check_reassignments(self) -> list[str]:
        sim = self.sim
        books = sim.books
        if not books.reassignments:
            return []
        out: list[str] = []
        in_znode = sim.admin.get_partition_reassignment()
        marked = set(sim.admin.get_topics_marked_for_deletion())
        in_contexts: set[TopicPartition] = set()
        for broker in sim.brokers.values():
            shell = broker.shell
            if broker.alive and shell is not None and shell.core.ctx is not None:
                in_contexts |= set(shell.core.ctx.reassignments)
        for key, target in sorted(books.reassignments.items()):
            topic, incarnation, partition = key
            tp = TopicPartition(topic, partition)
            if (
                incarnation != sim.incarnation_of(topic)
                or topic in marked
                or (topic, incarnation) in books.deleted
            ):
                del books.reassignments[key]
                continue
            if tp in in_znode or tp in in_contexts:
                continue
            del books.reassignments[key]
            assignment = sim.admin.get_topic_assignment(topic)
            replicas = None if assignment is None else assignment.get(partition)
            if replicas is None:
                continue
            if tuple(replicas) != target:
                out.append(
                    f"{tp}: reassignment to {list(target)} is no longer in progress but "
                    f"the replicas are {replicas}"
                )
        return out

    def _check_acks(self) -> list[str]:
        sim = self.sim
        acked = sim.books.acked
        out: list[str] = []
        needed = sim.config.min_insync_replicas
        for ack in acked[self.acked_seen :]:
            if ack.acks_all and not ack.deleting and len(ack.holders) < needed:
                out.append(
                    f"{ack.tp}: {ack.value} acknowledged (acks=all) at offset {ack.offset} "
                    f"while only {sorted(ack.holders)} of the ISR {sorted(ack.isr)} held it "
                    f"(min.insync.replicas={needed})"
                )
        self.acked_seen = len(acked)
        return out

    def _check_replicas(self) -> list[str]:
        sim = self.sim
        out: list[str] = []
        by_tp: dict[TopicPartition, list[ClusterReplica]] = {}
        deleted = sim.books.deleted
        for broker in sim.brokers.values():
            for tp, replica in broker.replicas.items():
                if replica.high_watermark > replica.log_end_offset:
                    out.append(
                        f"broker {broker.broker_id} {tp}: HW {replica.high_watermark} > "
                        f"LEO {replica.log_end_offset}"
                    )
                if broker.alive:
                    waited_for = deleted.get((tp.topic, replica.incarnation))
                    if waited_for is not None and (broker.broker_id, tp.partition) in waited_for:
                        out.append(
                            f"broker {broker.broker_id} still has a replica of {tp} (creation "
                            f"{replica.incarnation}) whose deletion completed"
                        )
                    if replica.hosted and replica.incarnation != sim.incarnation_of(tp.topic):
                        out.append(
                            f"broker {broker.broker_id} serves {tp} of the topic's creation "
                            f"{sim.incarnation_of(tp.topic)} from the log of creation "
                            f"{replica.incarnation}"
                        )
                by_tp.setdefault(tp, []).append(replica)
        unclean = sim.books.unclean
        for tp, replicas in by_tp.items():
            if len(replicas) < 2:
                continue
            incarnation = sim.incarnation_of(tp.topic)
            replicas = [r for r in replicas if r.incarnation == incarnation]
            if len(replicas) < 2:
                continue
            if (tp.topic, incarnation, tp.partition) in unclean:
                continue
            top = max(replicas, key=lambda r: r.high_watermark)
            for replica in replicas:
                hw = replica.high_watermark
                if replica is top or hw == 0:
                    continue
                if replica.values[:hw] != top.values[:hw] or replica.epochs[:hw] != top.epochs[:hw]:
                    out.append(
                        f"{tp}: brokers {replica.broker_id} and {top.broker_id} differ below "
                        f"HW {hw}"
                    )
        return out

    # -- at settle ------------------------------------------------------------------------

    def check_settled(self) -> list[str]:
        sim = self.sim
        out = self.check_step()
        books = sim.books
        # A topic still marked for deletion (a deletion stopped half-way, e.g. by a
        # lost ZooKeeper reply) keeps no durability promise: its replicas may be gone.
        marked = set(sim.admin.get_topics_marked_for_deletion())
        for ack in books.acked:
            if not ack.acks_all or ack.tp.topic in marked:
                continue
            tp = ack.tp
            key = (tp.topic, ack.incarnation, tp.partition)
            if (
                ack.incarnation != sim.incarnation_of(tp.topic)
                or (tp.topic, ack.incarnation) in books.deleted
                or key in books.unclean
            ):
                continue
            state = sim.partition_state(tp)
            if state is None or state.leader == NO_LEADER:
                continue
            leader = sim.brokers[state.leader].replicas.get(tp)
            if (
                leader is None
                or leader.log_end_offset <= ack.offset
                or leader.values[ack.offset] != ack.value
            ):
                out.append(
                    f"{tp}: acknowledged write {ack.value} (offset {ack.offset}) is not in "
                    f"the final leader {state.leader}'s log"
                )
        out += self._check_converged()
        return out

    def _check_converged(self) -> list[str]:
        """At settle, a follower that caught up with its leader (same leader epoch, same
        LEO) holds the leader's log record for record, unclean elections or not: the
        divergence KIP-279 ends (two brokers lost at once) leaves a follower whose LEO
        matches while an earlier record differs."""
        sim = self.sim
        out: list[str] = []
        for topic in sim.topics():
            assignment = sim.assignment(topic) or {}
            for partition in sorted(assignment):
                tp = TopicPartition(topic, partition)
                state = sim.partition_state(tp)
                if state is None or state.leader == NO_LEADER:
                    continue
                leader = sim.brokers[state.leader].replicas.get(tp)
                if leader is None or leader.partition is None:
                    continue
                for broker_id in assignment[partition]:
                    replica = sim.brokers[broker_id].replicas.get(tp)
                    if (
                        broker_id == state.leader
                        or replica is None
                        or not replica.hosted
                        or replica.leader_epoch != leader.leader_epoch
                        or replica.log_end_offset != leader.log_end_offset
                    ):
                        continue
                    if replica.values != leader.values or replica.epochs != leader.epochs:
                        first = next(
                            i
                            for i, (a, b) in enumerate(
                                zip(replica.values, leader.values, strict=True)
                            )
                            if a != b or replica.epochs[i] != leader.epochs[i]
                        )
                        out.append(
                            f"{tp}: broker {broker_id} caught up with leader {state.leader} "
                            f"but their logs differ at offset {first}"
                        )
        return out


class CheckedRun(NamedTuple):
    violations: list[str]
    # Settle ended without the cluster becoming quiescent (a liveness problem: a
    # reassignment, deletion or catch-up that never finishes). Reported apart from the
    # safety violations above.
    stuck: bool


def run_checked(
    sim: ClusterSim,
    schedule: Sequence[ClusterEvent],
    stop_at_first: bool = True,
    settle: bool = True,
) -> CheckedRun:
    """Replay `schedule` on `sim`, checking after every step and at settle."""
    checker = ClusterChecker(sim)
    violations: list[str] = []
    for index, event in enumerate(schedule, start=1):
        sim.step(event)
        problems = checker.check_step()
        if problems:
            violations += [f"step {index} ({event.describe()}): {p}" for p in problems]
            if stop_at_first:
                return CheckedRun(violations, False)
    stuck = False
    if settle:
        stuck = not sim.settle()
        violations += [f"settle: {p}" for p in checker.check_settled()]
    return CheckedRun(violations, stuck)
