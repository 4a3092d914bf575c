"""KIP-227 fetch sessions: the leader's cache and the fetcher's handler, without I/O."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strandline.client.fetch_session import FetchSessionHandler
from strandline.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    PartitionAnswer,
    PartitionPosition,
    SessionFetch,
    next_epoch,
)
from strandline.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(5)]
NOW = 1_000


def positions(offset: int = 0) -> dict[TopicPartition, PartitionPosition]:
    return {tp: PartitionPosition(offset, 1 << 20) for tp in TPS}


def answer(hw: int = 0, records: bool = False, more: bool = False) -> PartitionAnswer:
    return PartitionAnswer(ErrorCode.none, records, hw, hw, 0, more)


def open_session(cache: FetchSessionCache, replica_id: int = 2) -> SessionFetch:
    fetch = cache.open_fetch(0, INITIAL_EPOCH, replica_id, positions(), [], NOW)
    assert isinstance(fetch, SessionFetch) and fetch.session is not None
    named = fetch.respond({tp: answer() for tp in TPS})
    assert named == TPS, "a full fetch names every partition"
    return fetch


def incremental(
    cache: FetchSessionCache,
    fetch: SessionFetch,
    requested: dict[TopicPartition, PartitionPosition] | None = None,
    forgotten: list[TopicPartition] | None = None,
) -> SessionFetch:
    assert fetch.session is not None
    nxt = cache.open_fetch(
        fetch.session.id, fetch.session.epoch, 2, requested or {}, forgotten or [], NOW + 1
    )
    assert isinstance(nxt, SessionFetch)
    return nxt


def test_idle_incremental_fetch_reads_and_names_nothing() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    nxt = incremental(cache, fetch)
    assert nxt.to_read() == {}
    assert nxt.respond({}) == []


def test_a_touched_partition_is_read_at_the_cached_position_and_named_when_it_changed() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    assert fetch.session is not None
    assert cache.touch(TPS[3]) == [fetch.session.id]
    nxt = incremental(cache, fetch)
    assert list(nxt.to_read()) == [TPS[3]]
    assert nxt.to_read()[TPS[3]].fetch_offset == 0
    # Same HW as last told and no records: not named.
    assert nxt.respond({TPS[3]: answer(hw=0)}) == []
    cache.touch(TPS[3])
    again = incremental(cache, nxt)
    assert again.respond({TPS[3]: answer(hw=7)}) == [TPS[3]]


def test_a_partition_touched_while_the_fetch_waits_joins_it() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    nxt = incremental(cache, fetch, {TPS[0]: PartitionPosition(4, 1 << 20)})
    assert list(nxt.to_read()) == [TPS[0]]
    cache.touch(TPS[1])
    assert list(nxt.to_read()) == [TPS[0], TPS[1]]


def test_data_left_out_is_read_again_without_a_new_append() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    nxt = incremental(cache, fetch, {TPS[2]: PartitionPosition(9, 1 << 20)})
    nxt.respond({TPS[2]: answer(more=True)})
    assert list(incremental(cache, nxt).to_read()) == [TPS[2]]


def test_epoch_mismatch_unknown_session_and_closing() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    assert fetch.session is not None
    sid, epoch = fetch.session.id, fetch.session.epoch
    assert cache.open_fetch(sid, epoch + 1, 2, {}, [], NOW) == ErrorCode.invalid_fetch_session_epoch
    assert cache.open_fetch(sid + 99, epoch, 2, {}, [], NOW) == ErrorCode.fetch_session_id_not_found
    # Another replica cannot use this session.
    assert cache.open_fetch(sid, epoch, 3, {}, [], NOW) == ErrorCode.fetch_session_id_not_found
    closing = cache.open_fetch(sid, FINAL_EPOCH, 2, positions(), [], NOW)
    assert isinstance(closing, SessionFetch) and closing.session is None and closing.full
    assert cache.get(sid) is None
    assert cache.touch(TPS[0]) == []


def test_forgotten_partitions_leave_the_session() -> None:
    cache = FetchSessionCache()
    fetch = open_session(cache)
    nxt = incremental(cache, fetch, forgotten=[TPS[0]])
    assert nxt.session is not None and TPS[0] not in nxt.session.partitions
    assert cache.touch(TPS[0]) == []


def test_eviction_takes_a_consumer_session_before_a_follower_one() -> None:
    cache = FetchSessionCache(slots=2)
    follower = open_session(cache, replica_id=2)
    consumer = open_session(cache, replica_id=-1)
    newer = open_session(cache, replica_id=3)
    assert follower.session is not None and consumer.session is not None
    assert newer.session is not None
    assert cache.get(follower.session.id) is not None
    assert cache.get(consumer.session.id) is None
    assert len(cache) == 2


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch((1 << 31) - 1) == 1


def test_handler_sends_only_changed_positions_and_forgets_unwanted_ones() -> None:
    handler = FetchSessionHandler()
    full = handler.plan(positions())
    assert full.full and full.epoch == INITIAL_EPOCH and list(full.to_send) == TPS
    handler.on_response(full, ErrorCode.none, 42)
    wanted = positions()
    wanted[TPS[1]] = PartitionPosition(10, 1 << 20)
    del wanted[TPS[4]]
    plan = handler.plan(wanted)
    assert (plan.session_id, plan.epoch, plan.full) == (42, 1, False)
    assert list(plan.to_send) == [TPS[1]]
    assert plan.forgotten == [TPS[4]]
    handler.on_response(plan, ErrorCode.none, 42)
    assert handler.position(TPS[1]) == PartitionPosition(10, 1 << 20)
    idle = handler.plan(wanted)
    assert idle.epoch == 2 and idle.to_send == {} and idle.forgotten == []


def test_handler_starts_over_after_a_session_error_or_a_lost_answer() -> None:
    handler = FetchSessionHandler()
    full = handler.plan(positions())
    handler.on_response(full, ErrorCode.none, 42)
    plan = handler.plan(positions())
    handler.on_response(plan, ErrorCode.fetch_session_id_not_found, 0)
    assert handler.plan(positions()).full
    handler.on_response(handler.plan(positions()), ErrorCode.none, 43)
    handler.on_failure()
    assert handler.plan(positions()).full


def test_without_sessions_every_fetch_is_full_and_sessionless() -> None:
    handler = FetchSessionHandler(use_sessions=False)
    plan = handler.plan(positions())
    assert plan.full and plan.epoch == FINAL_EPOCH
    handler.on_response(plan, ErrorCode.none, 0)
    assert handler.plan(positions()).full


def test_a_waiting_fetch_takes_only_the_partitions_changed_since_it_last_looked() -> None:
    cache = FetchSessionCache()
    nxt = incremental(cache, open_session(cache), {TPS[0]: PartitionPosition(4, 1 << 20)})
    cache.touch(TPS[1])
    assert list(nxt.take_new()) == [TPS[1]]
    assert nxt.take_new() == {}, "nothing changed since"
    cache.touch(TPS[2])
    assert list(nxt.take_new()) == [TPS[2]]
    assert list(nxt.to_read()) == [TPS[0], TPS[1], TPS[2]]


# --- sessions are guarded (docs/security.md) ---------------------------------------------------


def test_session_ids_are_random_not_sequential() -> None:
    cache = FetchSessionCache()
    ids = []
    for _ in range(50):
        fetch = cache.open_fetch(0, INITIAL_EPOCH, -1, positions(), [], NOW, owner="User:a@h")
        assert isinstance(fetch, SessionFetch) and fetch.session is not None
        ids.append(fetch.session.id)
    assert len(set(ids)) == 50 and all(0 < i < 2**31 for i in ids)
    steps = {b - a for a, b in zip(ids, ids[1:], strict=False)}
    assert len(steps) > 40, "ids are not a sequence"


def test_only_the_owner_uses_or_closes_a_session() -> None:
    cache = FetchSessionCache()
    mine = cache.open_fetch(0, INITIAL_EPOCH, 2, positions(), [], NOW, owner="User:broker-2@h")
    assert isinstance(mine, SessionFetch) and mine.session is not None
    session = mine.session
    # Someone else's full fetch naming it (close, or close and reopen) leaves it be.
    for epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        other = cache.open_fetch(session.id, epoch, 2, positions(), [], NOW, owner="User:eve@h")
        assert isinstance(other, SessionFetch)
        assert cache.get(session.id) is session
        assert other.session is None or other.session.id != session.id
    # ...nor can they fetch incrementally in it (moving its epoch, its last fetch time).
    epoch = session.epoch
    answer_to_eve = cache.open_fetch(session.id, epoch, 2, {}, [], NOW + 5, owner="User:eve@h")
    assert answer_to_eve == ErrorCode.fetch_session_id_not_found
    assert session.epoch == epoch and session.last_used_ms == NOW
    # Its owner still can, and closes it.
    assert isinstance(
        cache.open_fetch(session.id, epoch, 2, {}, [], NOW + 6, owner="User:broker-2@h"),
        SessionFetch,
    )
    cache.open_fetch(session.id, FINAL_EPOCH, 2, {}, [], NOW + 7, owner="User:broker-2@h")
    assert cache.get(session.id) is None


def test_a_diverging_partition_is_always_named() -> None:
    """Kafka's FetchSession: a diverging_epoch answer is named even with nothing else
    new, so the fetcher truncates; its last_fetched_epoch is kept with its position."""
    cache = FetchSessionCache()
    fetch = open_session(cache)
    moved = PartitionPosition(4, 1 << 20, last_fetched_epoch=3)
    nxt = incremental(cache, fetch, {TPS[1]: moved})
    assert nxt.to_read()[TPS[1]].last_fetched_epoch == 3
    same = PartitionAnswer(ErrorCode.none, False, 0, 0, 0)
    assert nxt.respond({TPS[1]: same}) == []
    again = incremental(cache, nxt, {TPS[1]: moved})
    diverging = PartitionAnswer(ErrorCode.none, False, 0, 0, 0, diverging=True)
    assert again.respond({TPS[1]: diverging}) == [TPS[1]]
