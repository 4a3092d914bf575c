"""Broker processes in the whole-cluster simulator: start (KafkaServer.startup), crash,
restart, and a ZooKeeper session expiring under a live process (re-registration with a
new broker epoch). What survives a restart is what a disk keeps: the log, the HW
checkpoint and the epoch cache.
"""

from __future__ import annotations

from strandline.controller import effects as fx
from strandline.controller.procedures import ControllerCore, RebalanceSettings
from strandline.replication.follower import FollowerState
from strandline.sim.cluster_controller import register_watch, watch_controller
from strandline.sim.cluster_datapath import fail_waiting
from strandline.sim.cluster_state import (
    NO_LEADER,
    ClusterReplica,
    ClusterState,
    ControllerShell,
    SimBroker,
)
from strandline.sim.zk_client import SimZkClient


def start_broker(cluster: ClusterState, broker: SimBroker) -> None:
    """KafkaServer.startup: a new ZooKeeper session, stray logs deleted, registration
    (the broker epoch), the controller's /controller watch and its Startup event."""
    broker.alive = True
    broker.incarnation += 1
    broker.controller_epoch = 0
    broker.applied_controller_epoch = 0
    broker.metadata = {}
    broker.metadata_controller = -1
    zk = SimZkClient(cluster.zk, cluster.zk.new_session())
    broker.zk = zk
    for replica in broker.replicas.values():
        _reload_from_disk(cluster, replica)
    _delete_stray_logs(cluster, broker)
    broker.broker_epoch = zk.register_broker(broker.broker_id, f"b{broker.broker_id}", 9092)
    core = ControllerCore(
        broker.broker_id,
        cluster.unclean,
        RebalanceSettings(enable=cluster.config.auto_leader_rebalance),
    )
    shell = ControllerShell(core, broker.incarnation)
    broker.shell = shell
    watch_controller(broker)
    shell.events.append(fx.Startup())
    cluster.note(f"broker {broker.broker_id} starts, broker epoch {broker.broker_epoch}")


def _reload_from_disk(cluster: ClusterState, replica: ClusterReplica) -> None:
    # What survives a restart: the log, the HW checkpoint and the epoch cache; the
    # role comes again from the controller's LeaderAndIsr.
    replica.hosted = False
    replica.partition = None
    replica.held_response = None
    replica.leader = NO_LEADER
    replica.leader_epoch = -1
    replica.waiting = []
    replica.high_watermark = min(replica.checkpointed_hw, replica.log_end_offset)
    replica.epoch_cache.truncate_from_end(replica.log_end_offset)
    replica.follower = FollowerState(cluster.config.truncation)


def _delete_stray_logs(cluster: ClusterState, broker: SimBroker) -> None:
    """As Broker._delete_stray_logs: a log whose partition ZooKeeper no longer assigns
    to this broker goes (a topic still marked for deletion keeps its znodes, so its
    replicas stay for the controller's StopReplica)."""
    assert broker.zk is not None
    assignments: dict[str, dict[int, list[int]] | None] = {}
    for tp in sorted(broker.replicas):
        if tp.topic not in assignments:
            assignments[tp.topic] = broker.zk.get_topic_assignment(tp.topic)
        assignment = assignments[tp.topic]
        if assignment is None or broker.broker_id not in assignment.get(tp.partition, ()):
            del broker.replicas[tp]
            cluster.log(broker.broker_id, "stray-replica-deleted", tp=tp)


def crash(cluster: ClusterState, broker: SimBroker) -> None:
    if not broker.alive:
        return
    broker.alive = False
    broker.crashed_at_ms = cluster.now_ms
    if broker.shell is not None:
        if broker.shell.proc is not None:
            broker.shell.proc.close()
        broker.shell = None
    for replica in broker.replicas.values():
        fail_waiting(cluster, replica, "NOT_LEADER_OR_FOLLOWER")
        replica.partition = None
        replica.hosted = False
    # The process's outgoing request queues die with it; requests to it are lost.
    for (src, dst), channel in cluster.channels.items():
        if src == broker.broker_id or dst == broker.broker_id:
            channel.queue.clear()
            channel.held = 0
    cluster.note(f"broker {broker.broker_id} crashes (its session lives until it expires)")


def restart(cluster: ClusterState, broker: SimBroker) -> None:
    if broker.alive:
        return
    # register_broker would fail while the old ephemeral znode exists: the broker
    # waits that long (the old session expires first).
    if broker.zk is not None:
        broker.zk.close()
    start_broker(cluster, broker)


def expire_session(cluster: ClusterState, broker: SimBroker) -> None:
    """The session expires while the process lives: Kafka's re-registration. The
    controller keeps its context (a zombie) until it processes ControllerChange."""
    if not broker.alive or broker.zk is None or broker.shell is None:
        return
    old = broker.zk
    old.close()
    zk = SimZkClient(cluster.zk, cluster.zk.new_session())
    # The same ZkClient object lives on in a real broker: it keeps the fencing
    # version of its last won election.
    zk.controller_epoch_zk_version = old.controller_epoch_zk_version
    broker.zk = zk
    broker.broker_epoch = zk.register_broker(broker.broker_id, f"b{broker.broker_id}", 9092)
    watch_controller(broker)
    shell = broker.shell
    for path, kind, event in shell.watches:
        register_watch(broker, path, kind, event)
    shell.events.append(fx.ControllerChange())
    cluster.note(
        f"broker {broker.broker_id}: ZooKeeper session expired; registered again with "
        f"broker epoch {broker.broker_epoch}"
    )


def renew_expired_sessions(cluster: ClusterState) -> None:
    """A live broker whose session expired under it (a lost reply's fault) registers
    again, as kazoo's session listener makes the broker do."""
    for broker in cluster.brokers.values():
        if broker.alive and broker.zk is not None and not broker.zk.alive:
            expire_session(cluster, broker)
