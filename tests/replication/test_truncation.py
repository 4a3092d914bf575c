from strandline.replication.truncation import (
    EpochEndOffset,
    TruncationDecision,
    TruncationMode,
    follower_truncation,
    truncation_on_offset_out_of_range,
)
from strandline.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache

KIP279 = TruncationMode.KIP279


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache([EpochEntry(e, o) for e, o in entries])


def test_hw_mode_truncates_to_own_high_watermark() -> None:
    decision = follower_truncation(TruncationMode.HW, cache((0, 0)), 5, 3, EpochEndOffset(0, 5))
    assert decision == TruncationDecision(3, True)


def test_undefined_leader_end_offset_truncates_to_high_watermark() -> None:
    decision = follower_truncation(KIP279, cache((0, 0)), 5, 2, EpochEndOffset(-1, -1))
    assert decision == TruncationDecision(2, True)


def test_matching_epoch_truncates_to_min_of_both_ends() -> None:
    # Follower: epoch 1 runs from 4 to its LEO 9; leader says epoch 1 ends at 7.
    decision = follower_truncation(KIP279, cache((0, 0), (1, 4)), 9, 0, EpochEndOffset(1, 7))
    assert decision == TruncationDecision(7, True)
    # The follower's own end for that epoch can be the smaller one.
    decision = follower_truncation(
        KIP279, cache((0, 0), (1, 4), (2, 6)), 9, 0, EpochEndOffset(1, 8)
    )
    assert decision == TruncationDecision(6, True)


def test_matching_epoch_never_truncates_past_leo() -> None:
    decision = follower_truncation(KIP279, cache((0, 0)), 2, 0, EpochEndOffset(0, 5))
    assert decision == TruncationDecision(2, True)


def test_differing_epoch_truncates_and_asks_again() -> None:
    # Unclean-election divergence: A holds epochs 0 and 2, B answers (epoch 1, end 1).
    decision = follower_truncation(KIP279, cache((0, 0), (2, 1)), 2, 0, EpochEndOffset(1, 1))
    assert decision == TruncationDecision(1, False)


def test_kip101_mode_takes_the_leader_end_offset_in_one_round() -> None:
    decision = follower_truncation(
        TruncationMode.KIP101, cache((0, 0), (2, 1)), 2, 0, EpochEndOffset(1, 1)
    )
    assert decision == TruncationDecision(1, True)


def test_follower_whose_epochs_start_after_the_answer_keeps_up_to_its_first_epoch() -> None:
    # Asked about epoch 1, the follower's cache answers (1, 2): its epoch 3 starts at 2.
    decision = follower_truncation(KIP279, cache((3, 2)), 4, 0, EpochEndOffset(1, 3))
    assert decision == TruncationDecision(2, True)


def test_leader_epoch_unknown_to_follower_truncates_to_leader_end() -> None:
    decision = follower_truncation(KIP279, cache((1, 0)), 4, 0, EpochEndOffset(5, 3))
    assert decision == TruncationDecision(3, True)


def test_offset_out_of_range_with_shorter_leader_truncates_to_its_leo() -> None:
    assert truncation_on_offset_out_of_range(7, 0, 3) == (3, 3)


def test_offset_out_of_range_with_leader_start_beyond_us_truncates_fully() -> None:
    assert truncation_on_offset_out_of_range(3, 10, 20) == (0, 10)
