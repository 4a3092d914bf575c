"""An election whose state write meets a newer zkVersion is elected again from the state
read back (Kafka's PartitionStateMachine retries), not left offline."""

from __future__ import annotations

from typing import Any

from strandline.controller import decisions
from strandline.controller import effects as fx
from strandline.controller.context import BrokerRegistration, ControllerContext
from strandline.controller.procedures import ControllerCore
from strandline.coordination.znodes import LeaderAndIsr
from strandline.types import TopicPartition

TP = TopicPartition("t", 0)


def test_a_failover_election_that_loses_to_an_isr_write_is_retried() -> None:
    core = ControllerCore(1, lambda _topic: False)
    ctx = core.ctx = ControllerContext(broker_id=1, epoch=5)
    ctx.live_brokers = {
        b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, epoch=b) for b in (1, 3)
    }
    ctx.assignments[TP] = (2, 3, 1)
    # The controller's view: leader 2, ISR {2, 3}, version 1. Broker 2 had just written
    # ISR {1, 2, 3} (version 2) before it died, and the notification was not read yet.
    ctx.partition_states[TP] = LeaderAndIsr(2, 1, (2, 3), 5, 1)
    on_zookeeper = LeaderAndIsr(2, 1, (1, 2, 3), 5, 2)

    procedure = core._apply(decisions.on_brokers_failed(ctx, {2}, core.unclean))
    writes: list[dict[TopicPartition, tuple[LeaderAndIsr, int]]] = []
    sent: list[Any] = []
    answer: Any = None
    try:
        while True:
            effect = procedure.send(answer)
            answer = None
            if isinstance(effect, fx.WritePartitionStates):
                writes.append(effect.updates)
                state, version = effect.updates[TP]
                if version == on_zookeeper.zk_version:
                    answer = {TP: version + 1}
                else:
                    answer = {TP: RuntimeError(f"expected zkVersion {version}")}
            elif isinstance(effect, fx.ReadPartitionStates):
                answer = {TP: (on_zookeeper, on_zookeeper.zk_version)}
            elif isinstance(effect, (fx.SendLeaderAndIsr, fx.SendUpdateMetadata)):
                sent.append(effect)
    except StopIteration as done:
        written = done.value

    assert written == [TP]
    assert len(writes) == 2, "the conflict is written again from the state read back"
    state, version = writes[1][TP]
    assert version == 2 and state.leader == 3 and 2 not in state.isr
    assert ctx.partition_states[TP].leader == 3
    assert any(isinstance(e, fx.SendLeaderAndIsr) for e in sent)
