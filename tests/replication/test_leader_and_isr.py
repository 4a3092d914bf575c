"""The broker's LeaderAndIsr decisions (`replication/leader_and_isr.py`), shared by the
broker's ReplicaManager and the simulated brokers."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strandline.replication import leader_and_isr as lai
from strandline.replication.follower import FetchState
from strandline.replication.truncation import TruncationMode


def test_a_state_for_another_broker_or_an_old_epoch_is_refused() -> None:
    assert lai.decide(1, 0, (0, 2), 3, None).error == ErrorCode.unknown_topic_or_partition
    assert lai.decide(1, 0, (0, 1), 3, 3).error == ErrorCode.stale_controller_epoch
    assert lai.decide(1, 0, (0, 1), 3, 4).error == ErrorCode.stale_controller_epoch
    assert lai.decide(1, 1, (0, 1), 4, 3) == lai.StateDecision(None, True)
    assert lai.decide(1, 0, (0, 1), 4, None) == lai.StateDecision(None, False)


def test_a_new_leader_starts_its_epoch_at_its_log_end_with_the_controllers_isr() -> None:
    start = lai.become_leader(1, 5, (1, 2), (1, 2, 3), 10, 7, 500, 1000)
    assert start.epoch_start == (5, 10)
    assert start.partition.isr == frozenset({1, 2})
    assert start.partition.leader_epoch == 5
    assert start.partition.high_watermark == 7
    assert sorted(start.partition.remote_replicas) == [2, 3]


def test_a_leader_becoming_follower_keeps_its_last_hw() -> None:
    leading = lai.become_leader(1, 5, (1,), (1, 2), 10, 10, 500, 0).partition
    start = lai.become_follower(TruncationMode.HW, 2, 6, 12, 3, leading)
    assert start.high_watermark == 10
    assert start.truncate_to == 10  # pre-KIP-101: to the HW at once


def test_epoch_modes_wait_for_the_leader_before_truncating() -> None:
    for mode in (TruncationMode.KIP101, TruncationMode.KIP279):
        start = lai.become_follower(mode, 2, 6, 12, 3, None)
        assert start.truncate_to is None
        assert start.high_watermark == 3
        assert start.follower.fetch_state is FetchState.TRUNCATING
        assert (start.follower.leader_id, start.follower.leader_epoch) == (2, 6)
