from kio.schema.errors import ErrorCode

from strandline.replication.partition import Partition

LAG = 1000
LEADER, F1, F2 = 0, 1, 2


def leader_with(isr: set[int], leo: int = 0, hw: int = 0, now: int = 0) -> Partition:
    partition = Partition(LEADER, LAG)
    partition.become_leader(1, frozenset(isr), [LEADER, F1, F2], leo, hw, now)
    return partition


def test_remote_leo_is_the_fetch_offset() -> None:
    partition = leader_with({0, 1, 2}, leo=5)
    partition.on_follower_fetch(F1, 3, now_ms=10)
    assert partition.remote_replicas[F1].log_end_offset == 3


def test_hw_is_min_leo_over_isr_and_never_exceeds_a_lagging_isr_member() -> None:
    partition = leader_with({0, 1, 2})
    assert partition.on_append(5, now_ms=1) is None  # followers' LEOs are still unknown
    partition.on_follower_fetch(F1, 5, now_ms=2)
    assert partition.high_watermark == 0
    outcome = partition.on_follower_fetch(F2, 3, now_ms=3)
    assert outcome.high_watermark_advanced == 3
    assert partition.high_watermark == 3


def test_fetch_response_carries_the_hw_from_before_the_fetch() -> None:
    # Kafka's HW rule (docs/replication.md): the fetch that moves the HW still answers the old one.
    partition = leader_with({0, 1}, leo=0)
    partition.remote_replicas.pop(F2)
    partition.on_append(1, now_ms=1)
    outcome = partition.on_follower_fetch(F1, 1, now_ms=2)
    assert outcome.response_high_watermark == 0
    assert outcome.high_watermark_advanced == 1
    assert partition.on_follower_fetch(F1, 1, now_ms=3).response_high_watermark == 1


def test_hw_never_moves_backwards() -> None:
    partition = leader_with({0, 1}, leo=4, hw=4)
    partition.remote_replicas.pop(F2)
    partition.on_follower_fetch(F1, 2, now_ms=1)  # a restarted follower fetches lower
    assert partition.high_watermark == 4


def test_new_leader_starts_from_its_own_hw_capped_by_leo() -> None:
    partition = leader_with({0}, leo=3, hw=7)
    assert partition.high_watermark == 3
    assert partition.leader_epoch_start_offset == 3


def test_caught_up_follower_outside_isr_holds_back_the_hw() -> None:
    # Kafka's ISR rule: a recovered follower that caught up within the lag counts before rejoining.
    partition = leader_with({0}, leo=2, hw=2, now=0)
    partition.on_follower_fetch(F1, 2, now_ms=10)  # caught up: LEO == leader LEO
    partition.apply_isr(frozenset({0}), now_ms=10)  # its ISR expansion has not landed
    partition.on_append(4, now_ms=20)
    assert partition.high_watermark == 2
    assert partition.on_append(4, now_ms=10 + LAG + 1) == 4  # no longer caught up


def test_isr_shrinks_when_a_follower_has_not_caught_up_within_the_lag() -> None:
    partition = leader_with({0, 1, 2}, now=0)
    partition.on_append(3, now_ms=10)
    partition.on_follower_fetch(F1, 3, now_ms=20)
    assert partition.isr_shrink_proposal(now_ms=LAG) is None
    assert partition.isr_shrink_proposal(now_ms=LAG + 1) == frozenset({0, 1})
    advanced = partition.apply_isr(frozenset({0, 1}), now_ms=LAG + 1)
    assert advanced == 3  # re-evaluated on shrink


def test_follower_rejoins_isr_once_its_leo_reaches_the_hw() -> None:
    partition = leader_with({0}, leo=4, hw=4)
    assert partition.on_follower_fetch(F1, 3, now_ms=5).isr_expand is None
    outcome = partition.on_follower_fetch(F1, 4, now_ms=6)
    assert outcome.isr_expand == frozenset({0, 1})
    partition.apply_isr(outcome.isr_expand, now_ms=6)
    assert partition.isr == frozenset({0, 1})


def test_pending_isr_expansion_already_holds_back_the_hw() -> None:
    partition = leader_with({0, 1}, leo=0, hw=0)
    partition.on_follower_fetch(F2, 0, now_ms=1)  # joins (LEO 0 >= HW 0)
    partition.on_append(1, now_ms=5 * LAG)
    outcome = partition.on_follower_fetch(F1, 1, now_ms=5 * LAG)
    assert outcome.high_watermark_advanced is None  # F2 is in the maximal ISR


def test_acks_all_refused_below_min_insync_replicas() -> None:
    partition = leader_with({0})
    assert partition.check_produce(-1, 2) == ErrorCode.not_enough_replicas
    assert partition.check_produce(1, 2) == ErrorCode.none
    assert leader_with({0, 1}).check_produce(-1, 2) == ErrorCode.none


def test_acks_all_completes_when_hw_passes_and_fails_if_isr_shrank_meanwhile() -> None:
    partition = leader_with({0, 1})
    partition.remote_replicas.pop(F2)
    partition.on_append(1, now_ms=1)
    assert partition.produce_completion(0, 2) is None
    partition.on_follower_fetch(F1, 1, now_ms=2)
    assert partition.produce_completion(0, 2) == ErrorCode.none
    partition.apply_isr(frozenset({0}), now_ms=3)
    assert partition.produce_completion(0, 2) == ErrorCode.not_enough_replicas_after_append


def test_consumers_read_below_the_hw_only() -> None:
    partition = leader_with({0}, leo=0)
    partition.remote_replicas.clear()
    partition.on_append(3, now_ms=1)
    assert partition.consumer_fetch_upper_bound() == partition.high_watermark == 3


def test_an_idle_partition_fetched_through_a_session_is_not_shrunk_by_its_next_append() -> None:
    # KIP-227: a follower at our LEO is not named in its session's fetches, so the
    # leader learns of those fetches only when it appends (the session's last fetch).
    partition = leader_with({0, 1, 2}, leo=5, hw=5, now=0)
    partition.on_follower_fetch(F1, 5, now_ms=1)
    partition.on_follower_fetch(F2, 5, now_ms=1)
    idle_until = 10 * LAG
    partition.on_append(6, now_ms=idle_until, session_fetch_ms={F1: idle_until - 50})
    # F1's session fetched just before the append: caught up then, so still in sync.
    # F2's fetcher said nothing since 1 ms: it lags by the whole idle period.
    assert partition.isr_shrink_proposal(now_ms=idle_until + 1) == frozenset({0, 1})
    assert partition.isr_followers_caught_up() is False
    partition.on_follower_fetch(F1, 6, now_ms=idle_until + 2)
    partition.on_follower_fetch(F2, 6, now_ms=idle_until + 2)
    assert partition.isr_followers_caught_up() is True


def test_a_session_fetch_from_before_the_follower_caught_up_changes_nothing() -> None:
    partition = leader_with({0, 1}, leo=5, hw=0, now=0)
    partition.remote_replicas.pop(F2)
    partition.on_follower_fetch(F1, 3, now_ms=1)  # behind the LEO
    partition.on_append(6, now_ms=5 * LAG, session_fetch_ms={F1: 5 * LAG - 1})
    assert partition.isr_shrink_proposal(now_ms=5 * LAG) == frozenset({0})


def test_an_expansion_that_was_not_written_is_proposed_again_without_a_new_fetch() -> None:
    partition = leader_with({0, 1}, leo=5, hw=5, now=0)
    outcome = partition.on_follower_fetch(F2, 5, now_ms=1)
    assert outcome.isr_expand == frozenset({0, 1, 2})
    assert partition.isr_expansion() is None, "already proposed"
    # The ZooKeeper write failed (a conflict): the ISR stays as written.
    partition.apply_isr(frozenset({0, 1}), now_ms=2)
    # F2 is idle at our LEO: its session fetches will not name this partition again.
    assert partition.isr_expansion() == frozenset({0, 1, 2})
    assert partition.maximal_isr == frozenset({0, 1, 2})
