"""The whole-cluster simulator's controller shell: it drives each broker's real
`ControllerCore` one effect per step (so a controller can be mid-procedure while
everything else moves) and carries the effects out on the broker's simulated ZooKeeper
session and its request channels, as `strandline.controller.controller` does with real
ZooKeeper and sockets.

No election or controller rule lives here: decisions come only from the controller
core, the ZooKeeper reads and writes from `controller/zk_effects.py`. A request to the
controller's own broker is applied in-process; others wait in the per-(controller,
broker) FIFO channel until delivered (`deliver`), held back or lost.
"""

from __future__ import annotations

from typing import Any

from strandline.controller import effects as fx
from strandline.controller import zk_effects
from strandline.coordination import znodes
from strandline.coordination.errors import ControllerMovedError
from strandline.errors import KafkaError
from strandline.sim.cluster_broker import apply_request
from strandline.sim.cluster_state import (
    ClusterState,
    ControllerRequest,
    ControllerShell,
    Message,
    SimBroker,
)
from strandline.sim.zookeeper import ZkError
from strandline.types import TopicPartition


def register_watch(broker: SimBroker, path: str, kind: str, event: fx.ControllerEvent) -> None:
    """A controller event on a znode's change (kazoo's recipes: children, or data
    while the znode exists), on the broker's current session."""
    assert broker.zk is not None and broker.shell is not None
    events = broker.shell.events
    if kind == "children":

        def on_children(_children: list[str]) -> None:
            events.append(event)

        broker.zk.watch_children(path, on_children)
    else:

        def when_present(data: bytes | None, _stat: object) -> None:
            if data is not None:
                events.append(event)

        broker.zk.watch_data(path, when_present)


def watch_controller(broker: SimBroker) -> None:
    assert broker.zk is not None and broker.shell is not None
    shell = broker.shell

    def on_controller(_data: bytes | None, _stat: object) -> None:
        shell.events.append(fx.ControllerChange())

    broker.zk.watch_data(znodes.CONTROLLER_PATH, on_controller)


def controller_step(cluster: ClusterState, broker: SimBroker) -> bool:
    """Carry out one effect of the broker's controller; False when it had nothing."""
    shell = broker.shell
    if not broker.alive or shell is None:
        return False
    if shell.proc is None:
        if not shell.events:
            return False
        event = shell.events.popleft()
        shell.proc = shell.core.handle(event)
        shell.result = None
    proc = shell.proc
    try:
        effect = proc.send(shell.result)
    except StopIteration:
        shell.proc = None
        return True
    except KafkaError:
        # The error answer (NotControllerError for a broker that is not the
        # controller): nobody waits for it in the simulator.
        shell.proc = None
        return True
    if cluster.record:
        _note_effect(cluster, broker, effect)
    try:
        shell.result = _carry_out(cluster, broker, shell, effect)
    except (ZkError, KafkaError) as e:
        # As controller.py: an effect that raises ends the procedure (logged there);
        # a fenced write makes the controller look at /controller again.
        proc.close()
        shell.proc = None
        if isinstance(e, ControllerMovedError):
            shell.events.append(fx.ControllerChange())
        cluster.note(f"controller {broker.broker_id}: {type(e).__name__} ends the procedure")
    return True


def _note_effect(cluster: ClusterState, broker: SimBroker, effect: fx.Effect) -> None:
    """The controller's steps, as Kafka's controller runs them (state-change lines are noted
    when they are logged)."""
    if isinstance(effect, fx.StateChange):
        return
    ctx = broker.shell.core.ctx if broker.shell is not None else None
    epoch = f"epoch {ctx.epoch}" if ctx is not None else "not controller"
    match effect:
        case fx.SendLeaderAndIsr(broker_id, request) | fx.SendUpdateMetadata(broker_id, request):
            what = (
                f"{type(effect).__name__[4:]} -> broker {broker_id} "
                f"(controller epoch {request.controller_epoch})"
            )
        case fx.SendStopReplica(broker_id, request, _deleting):
            what = (
                f"StopReplica{list(map(str, request.partitions))} -> broker {broker_id} "
                f"(delete={request.delete_partitions})"
            )
        case fx.WatchChildren(path, _) | fx.WatchData(path, _):
            what = f"watch {path}"
        case _:
            fields = ", ".join(f"{v}" for v in vars(effect).values())
            what = f"{type(effect).__name__}({fields})" if fields else type(effect).__name__
    cluster.note(f"controller {broker.broker_id} ({epoch}): {what}")


def _carry_out(
    cluster: ClusterState, broker: SimBroker, shell: ControllerShell, effect: fx.Effect
) -> Any:
    assert broker.zk is not None
    match effect:
        case fx.SendLeaderAndIsr(broker_id, request):
            _send(cluster, broker, broker_id, request, None)
        case fx.SendUpdateMetadata(broker_id, request):
            _send(cluster, broker, broker_id, request, None)
        case fx.SendStopReplica(broker_id, request, deleting):
            _send(cluster, broker, broker_id, request, deleting)
        case fx.ForgetBrokers(broker_ids):
            for dead in broker_ids:
                channel = cluster.channels.get((broker.broker_id, dead))
                if channel is not None:
                    channel.queue.clear()
        case fx.StateChange(kind, fields):
            cluster.state_change(broker.broker_id, kind, fields)
        case fx.WatchChildren(path, event):
            shell.watches.append((path, "children", event))
            register_watch(broker, path, "children", event)
        case fx.WatchData(path, event):
            if path not in shell.watched_data:
                shell.watched_data.add(path)
                shell.watches.append((path, "data", event))
                register_watch(broker, path, "data", event)
            else:  # as controller.py: the watch's first firing, for this term
                shell.events.append(event)
        case fx.BecameController(epoch):
            cluster.note(f"broker {broker.broker_id} is the controller (epoch {epoch})")
        case fx.Resigned():
            cluster.note(f"broker {broker.broker_id} resigned as controller")
        case fx.ReadPreferredElection():
            requested = zk_effects.perform(effect, broker.zk)
            shell.preferred_seen = _preferred_candidates(cluster, broker, requested)
            return requested
        case fx.DeletePreferredElection(handled):
            _check_preferred_answers(cluster, broker, handled)
            return zk_effects.perform(effect, broker.zk)
        case fx.DeleteTopicZnodes(topic):
            # The replicas the deletion waited for: ZooKeeper's assignment now, read
            # by the simulator's books (the admin session), not by the broker.
            assignment = cluster.admin.get_topic_assignment(topic) or {}
            result = zk_effects.perform(effect, broker.zk)
            key = (topic, cluster.incarnation_of(topic))
            cluster.books.deleted[key] = {
                (b, p) for p, replicas in assignment.items() for b in replicas
            }
            return result
        case _:
            return zk_effects.perform(effect, broker.zk)
    return None


def _preferred_candidates(
    cluster: ClusterState, broker: SimBroker, tps: list[TopicPartition]
) -> set[TopicPartition]:
    """The requested partitions whose preferred replica the controller could elect
    from what ZooKeeper holds now: live in its context and in ZooKeeper's ISR."""
    ctx = broker.shell.core.ctx if broker.shell is not None else None
    if ctx is None:
        return set()
    out = set()
    for tp in tps:
        assignment = cluster.admin.get_topic_assignment(tp.topic) or {}
        found = cluster.admin.get_partition_state(tp)
        replicas = assignment.get(tp.partition)
        if not replicas or found is None:
            continue
        state, preferred = found[0], replicas[0]
        if (
            state.leader != preferred
            and preferred in ctx.live_broker_ids
            and preferred in state.isr
            and tp not in ctx.reassignments
            and tp.topic not in ctx.topics_to_delete
        ):
            out.add(tp)
    return out


def _check_preferred_answers(
    cluster: ClusterState, broker: SimBroker, handled: tuple[TopicPartition, ...] | None
) -> None:
    """A preferred election taken off /admin/preferred_replica_election was acted on
    or rightly refused: not refused while its preferred replica was live and in
    ZooKeeper's ISR from the request's read until now."""
    shell = broker.shell
    if shell is None:
        return
    seen, shell.preferred_seen = shell.preferred_seen, set()
    still = _preferred_candidates(cluster, broker, sorted(seen))
    for tp in sorted(seen & still):
        if handled is None or tp in handled:
            cluster.books.problems.append(
                f"{tp}: preferred replica election dropped by controller "
                f"{broker.broker_id} although the preferred replica was live and in "
                "ZooKeeper's ISR"
            )


def _send(
    cluster: ClusterState,
    controller: SimBroker,
    broker_id: int,
    request: ControllerRequest,
    deleting: str | None,
) -> None:
    if broker_id == controller.broker_id:
        # As ControllerChannel: the controller's own broker applies it in-process.
        apply_request(cluster, controller, controller, Message(request, deleting))
        return
    cluster.channel(controller.broker_id, broker_id).queue.append(Message(request, deleting))


def deliver(cluster: ClusterState, controller_id: int, broker_id: int) -> bool:
    channel = cluster.channels.get((controller_id, broker_id))
    if channel is None or not channel.queue:
        return False
    message = channel.queue.popleft()
    target = cluster.brokers[broker_id]
    if not target.alive:
        return True  # lost with the connection; never answered
    apply_request(cluster, cluster.brokers[controller_id], target, message)
    return True
