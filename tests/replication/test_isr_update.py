"""The leader's ISR update protocol (replication/isr_update.py), driven effect by effect."""

from __future__ import annotations

from typing import Any

from strandline.coordination.errors import ZkFailure
from strandline.coordination.znodes import LeaderAndIsr
from strandline.replication.isr_update import (
    IsrUpdateResult,
    NotifyIsrChange,
    Outcome,
    ReadIsr,
    WriteIsr,
    isr_update,
    notify_again,
)
from strandline.types import TopicPartition

TP = TopicPartition("t", 0)
LOSS = ZkFailure.CONNECTION_LOSS


def drive(answers: list[Any], old: set[int], proposed: set[int]) -> tuple[list[Any], Any]:
    """Run an update of leader 1, epoch 5, zkVersion 7; the i-th effect gets answers[i]."""
    update = isr_update(TP, 1, 5, 3, 7, frozenset(old), frozenset(proposed))
    effects = [next(update)]
    for answer in answers:
        try:
            effects.append(update.send(answer))
        except StopIteration as done:
            return effects, done.value
    raise AssertionError(f"the update wants more than {answers}: {effects}")


def held(isr: tuple[int, ...], leader: int = 1, epoch: int = 5) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, 3)


def test_written_then_notified() -> None:
    effects, result = drive([8, "isr_change_1"], {1, 2}, {1, 2, 3})
    assert effects == [WriteIsr(TP, LeaderAndIsr(1, 5, (1, 2, 3), 3), 7), NotifyIsrChange(TP)]
    assert result == IsrUpdateResult(Outcome.WRITTEN, frozenset({1, 2, 3}), 8)


def test_lost_notification_keeps_the_written_isr_and_stays_pending() -> None:
    # The old code reverted the ISR here: ZooKeeper held {1,2,3}, the leader {1,2}.
    effects, result = drive([8, LOSS, LOSS], {1, 2}, {1, 2, 3})
    assert effects[1:] == [NotifyIsrChange(TP), NotifyIsrChange(TP)]
    assert result.outcome is Outcome.WRITTEN
    assert result.isr == {1, 2, 3} and result.zk_version == 8 and result.notify_pending


def test_notify_again_reports_whether_still_pending() -> None:
    again = notify_again(TP)
    assert next(again) == NotifyIsrChange(TP)
    try:
        again.send("isr_change_2")
    except StopIteration as done:
        assert done.value is False


def test_connection_loss_after_apply_reads_back_and_keeps_the_write() -> None:
    effects, result = drive([LOSS, (held((1, 2)), 8), "n"], {1, 2, 3}, {1, 2})
    assert effects[1:] == [ReadIsr(TP), NotifyIsrChange(TP)]
    assert result.outcome is Outcome.WRITTEN
    assert result.isr == {1, 2} and result.zk_version == 8


def test_connection_loss_before_apply_continues_from_zookeeper() -> None:
    _, result = drive([LOSS, (held((1, 2, 3)), 7), "n"], {1, 2, 3}, {1, 2})
    assert result.outcome is Outcome.ADOPTED
    assert result.isr == {1, 2, 3} and result.zk_version == 7


def test_bad_version_adopts_an_isr_this_leader_wrote_in_its_epoch() -> None:
    # An earlier write of ours whose reply was lost left {1,2,3} at version 9.
    _, result = drive([ZkFailure.BAD_VERSION, (held((1, 2, 3)), 9), "n"], {1, 2}, {1})
    assert result.outcome is Outcome.ADOPTED
    assert result.isr == {1, 2, 3} and result.zk_version == 9


def test_a_newer_controller_decision_fences_and_the_leader_waits_for_everyone() -> None:
    _, result = drive([ZkFailure.BAD_VERSION, (held((2, 3), leader=2, epoch=6), 9)], {1, 2}, {1})
    assert result.outcome is Outcome.FENCED
    # Never an ISR smaller than one ZooKeeper may hold: the HW waits for all of them.
    assert result.isr == {1, 2, 3} and result.zk_version == 7


def test_unknown_outcome_keeps_the_union_and_the_old_version() -> None:
    effects, result = drive([LOSS, LOSS, LOSS, LOSS], {1, 2, 3}, {1, 2})
    assert effects[1:] == [ReadIsr(TP)] * 3
    assert result.outcome is Outcome.UNKNOWN
    assert result.isr == {1, 2, 3} and result.zk_version == 7
    _, grown = drive([LOSS, LOSS, LOSS, LOSS], {1, 2}, {1, 2, 3})
    assert grown.isr == {1, 2, 3}


def test_session_expired_and_missing_znode_apply_nothing_smaller() -> None:
    _, expired = drive([ZkFailure.SESSION_EXPIRED], {1, 2}, {1})
    assert expired.outcome is Outcome.UNKNOWN and expired.isr == {1, 2}
    _, gone = drive([ZkFailure.BAD_VERSION, None], {1, 2}, {1})
    assert gone.outcome is Outcome.FENCED and gone.isr == {1, 2}
