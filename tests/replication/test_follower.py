from strandline.replication.follower import FetchState, FollowerState, follower_high_watermark
from strandline.replication.truncation import EpochEndOffset, TruncationMode
from strandline.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache


def test_follower_hw_is_min_of_leo_and_leader_hw() -> None:
    assert follower_high_watermark(5, 3) == 3
    assert follower_high_watermark(2, 3) == 2


def test_hw_mode_follower_truncates_to_hw_when_it_starts_following() -> None:
    state = FollowerState(TruncationMode.HW)
    assert (
        state.become_follower(leader_id=1, leader_epoch=4, log_end_offset=9, high_watermark=6) == 6
    )
    assert state.fetch_state is FetchState.FETCHING


def test_epoch_modes_do_not_truncate_to_hw_but_ask_the_leader() -> None:
    state = FollowerState(TruncationMode.KIP279)
    assert state.become_follower(1, 4, 9, 6) is None
    assert state.fetch_state is FetchState.TRUNCATING
    cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(2, 1)])
    first = state.on_epoch_answer(cache, 2, 0, EpochEndOffset(1, 1))
    assert not first.truncation_completed
    assert state.fetch_state is FetchState.TRUNCATING
    cache.truncate_from_end(first.offset)
    second = state.on_epoch_answer(cache, 1, 0, EpochEndOffset(0, 0))
    assert second.offset == 0 and second.truncation_completed
    assert state.fetch_state is FetchState.FETCHING


def test_stale_fetch_responses_are_dropped() -> None:
    state = FollowerState(TruncationMode.KIP279)
    state.become_follower(1, 4, 9, 6)
    assert not state.accepts_fetch_response(9, 4, 9)  # still truncating
    state.on_epoch_answer(LeaderEpochCache([EpochEntry(4, 0)]), 9, 6, EpochEndOffset(4, 9))
    assert state.accepts_fetch_response(9, 4, 9)
    assert not state.accepts_fetch_response(9, 3, 9)  # an older leader epoch
    assert not state.accepts_fetch_response(7, 4, 9)  # our log moved since the request
