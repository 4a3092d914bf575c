import pytest

from strandline.storage.leader_epoch_cache import (
    EpochEntry,
    LeaderEpochCache,
    parse_checkpoint,
    render_checkpoint,
)


def seed_cache() -> LeaderEpochCache:
    # A leader-epoch example: the leader holds (1, 20) (2, 80) (3, 120).
    return LeaderEpochCache([EpochEntry(1, 20), EpochEntry(2, 80), EpochEntry(3, 120)])


def test_end_offset_for_undefined_epoch_is_undefined() -> None:
    assert seed_cache().end_offset_for(-1, 150) == (-1, -1)


def test_end_offset_for_latest_epoch_is_the_log_end_offset() -> None:
    assert seed_cache().end_offset_for(3, 150) == (3, 150)


def test_end_offset_for_older_epoch_is_start_of_next_epoch() -> None:
    assert seed_cache().end_offset_for(1, 150) == (1, 80)


def test_end_offset_for_missing_epoch_answers_largest_epoch_below_it() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 1)])
    # Unclean-election divergence: A asks for epoch 2, which B never had.
    assert cache.end_offset_for(2, 2) == (1, 1)


def test_end_offset_for_epoch_older_than_all_entries() -> None:
    assert seed_cache().end_offset_for(0, 150) == (0, 20)


def test_end_offset_for_epoch_newer_than_all_entries_is_undefined() -> None:
    assert seed_cache().end_offset_for(9, 150) == (-1, -1)


def test_assign_ignores_older_epochs_and_drops_overwritten_ones() -> None:
    cache = LeaderEpochCache()
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)
    assert cache.assign(1, 3)
    assert cache.assign(2, 3)  # epoch 1 never wrote anything: its entry goes
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 3)]
    assert cache.latest_epoch == 2


def test_truncate_from_end_forgets_epochs_starting_at_or_after_offset() -> None:
    cache = seed_cache()
    cache.truncate_from_end(80)
    assert cache.entries == [EpochEntry(1, 20)]


def test_truncate_from_start_keeps_the_epoch_covering_the_new_start() -> None:
    cache = seed_cache()
    cache.truncate_from_start(100)
    assert cache.entries == [EpochEntry(2, 100), EpochEntry(3, 120)]


def test_checkpoint_round_trip_uses_kafka_text_format() -> None:
    entries = seed_cache().entries
    text = render_checkpoint(entries)
    assert text == "0\n3\n1 20\n2 80\n3 120\n"
    assert parse_checkpoint(text) == entries
    assert parse_checkpoint("0\n0\n") == []


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\n1 20\n", "0\n1\n1\n"])
def test_parse_checkpoint_rejects_malformed_files(text: str) -> None:
    with pytest.raises(ValueError):
        parse_checkpoint(text)
