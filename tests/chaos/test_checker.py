"""The chaos checker against hand-made and generated histories (pure, no cluster)."""

from __future__ import annotations

import io
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from strandline.chaos.checker import (
    ANOMALY_KINDS,
    COUNT_OF_KIND,
    CheckResult,
    check,
    fault_windows,
)
from strandline.chaos.history import HistoryFormatError, HistoryWriter, Op, read_history
from strandline.chaos.report import ScheduleResult, load_results, render_table, summarize
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.types import TopicPartition
from tests.storage.batches import build_batch

TOPIC = "t"


def send(
    t: float,
    value: str,
    offset: int | None = None,
    *,
    type: str = "ok",
    partition: int = 0,
    producer: str = "p0",
    seq: int = 0,
    idempotent: bool = True,
    acks: str = "all",
) -> Op:
    op: Op = {
        "t": t,
        "process": producer,
        "f": "send",
        "type": type,
        "topic": TOPIC,
        "partition": partition,
        "key": "k",
        "value": value,
        "producer": producer,
        "seq": seq,
        "idempotent": idempotent,
        "acks": acks,
    }
    if offset is not None:
        op["offset"] = offset
    return op


def final(offset: int, value: str, partition: int = 0, t: float = 1000.0) -> Op:
    return {
        "t": t,
        "process": "checker",
        "f": "final-read",
        "type": "ok",
        "topic": TOPIC,
        "partition": partition,
        "offset": offset,
        "value": value,
        "key": "k",
    }


def poll(
    t: float, offset: int, value: str, consumer: str = "c0", partition: int = 0, gen: int = 1
) -> Op:
    return {
        "t": t,
        "process": consumer,
        "f": "poll",
        "type": "ok",
        "consumer": consumer,
        "group": "g",
        "topic": TOPIC,
        "partition": partition,
        "offset": offset,
        "value": value,
        "generation": gen,
    }


def rebalance(t: float, f: str, consumer: str, partitions: list[int]) -> Op:
    return {
        "t": t,
        "process": consumer,
        "f": f,
        "type": "ok",
        "consumer": consumer,
        "group": "g",
        "partitions": [[TOPIC, p] for p in partitions],
    }


def commit(t: float, offset: int, consumer: str = "c0", partition: int = 0) -> Op:
    return {
        "t": t,
        "process": consumer,
        "f": "commit",
        "type": "ok",
        "consumer": consumer,
        "group": "g",
        "offsets": [[TOPIC, partition, offset]],
    }


def committed(t: float, offset: int | None, type: str = "ok", partition: int = 0) -> Op:
    op: Op = {"t": t, "process": "observer", "f": "committed", "type": type, "group": "g"}
    op["offsets"] = [] if offset is None else [[TOPIC, partition, offset]]
    return op


def fault(t: float, kind: str, phase: str, fault_id: int) -> Op:
    return {
        "t": t,
        "process": "nemesis",
        "f": "fault",
        "type": "info",
        "fault": kind,
        "phase": phase,
        "fault_id": fault_id,
        "detail": {},
    }


def compare(identical: bool) -> Op:
    return {
        "t": 1001.0,
        "process": "checker",
        "f": "replica-compare",
        "type": "ok",
        "topic": TOPIC,
        "partition": 0,
        "high_watermark": 3,
        "brokers": [1, 2, 3],
        "identical": identical,
        "detail": "",
    }


def clean_history() -> list[Op]:
    values = ["v0", "v1", "v2"]
    ops: list[Op] = [rebalance(0.0, "assign", "c0", [0])]
    for i, value in enumerate(values):
        ops.append(send(1.0 + i, value, i, seq=i))
        ops.append(poll(1.5 + i, i, value))
    ops += [commit(5.0, 3), committed(6.0, 3), compare(True)]
    ops += [final(i, v) for i, v in enumerate(values)]
    return ops


def kinds(result: CheckResult) -> list[str]:
    return [a.kind for a in result.anomalies]


def test_a_clean_history_checks_ok() -> None:
    result = check(clean_history(), seed=7)
    assert result.ok, result.anomalies
    assert result.acked == 3
    assert result.final_read_records == 3
    assert result.polled == 3
    assert result.anomalies == []
    data = json.loads(json.dumps(result.to_json()))
    assert data["ok"] is True and data["acked"] == 3
    assert CheckResult.from_json(data) == result


def test_an_acked_value_missing_from_the_final_read_is_lost() -> None:
    ops = clean_history() + [send(4.0, "v3", 3, seq=3)]
    result = check(ops, seed=42)
    assert not result.ok
    assert result.lost == 1 and result.wrong_offset == 0
    [anomaly] = result.anomalies
    assert anomaly.kind == "lost" and anomaly.seed == 42
    assert anomaly.detail["value"] == "v3" and anomaly.detail["offset"] == 3


def test_acks_1_losses_are_counted_apart_unless_asked() -> None:
    ops = clean_history() + [send(4.0, "v3", 3, seq=3, acks="1")]
    result = check(ops)
    assert result.ok and result.lost == 0 and result.lost_acks1 == 1
    strict = check(ops, acks1_loss_is_anomaly=True)
    assert strict.lost == 1 and kinds(strict) == ["lost"]


def test_an_implicitly_acked_send_has_no_offset_but_can_still_be_lost() -> None:
    # librdkafka: "2 message(s) implicitly acked by subsequent batch success" (chaos
    # seed 7025): delivered ok, offset unknown.
    implicit = send(4.0, "v3", seq=3)
    implicit["offset"] = None
    present = check(clean_history() + [implicit, final(3, "v3")])
    assert present.ok and present.acked == 4, present.anomalies
    missing = check(clean_history() + [implicit])
    assert missing.lost == 1 and missing.wrong_offset == 0 and kinds(missing) == ["lost"]


def test_a_failed_or_indeterminate_send_missing_is_not_lost() -> None:
    ops = clean_history() + [
        send(4.0, "v3", type="fail", seq=3),
        send(4.0, "v4", type="info", seq=4),
        send(4.5, "v5", type="invoke", seq=5),
    ]
    result = check(ops)
    assert result.ok
    assert (result.failed, result.indeterminate, result.acked) == (1, 1, 3)


def test_acked_at_5_but_found_at_6_is_a_wrong_offset() -> None:
    ops = [send(float(i), f"v{i}", i, seq=i) for i in range(5)]
    ops += [send(5.0, "v5", 5, seq=5)]
    ops += [final(i, f"v{i}") for i in range(5)] + [final(5, "other"), final(6, "v5")]
    result = check(ops)
    assert result.wrong_offset == 1 and result.lost == 0
    [anomaly] = result.anomalies
    assert anomaly.kind == "wrong-offset"
    assert anomaly.detail["acked_offset"] == 5
    assert anomaly.detail["found_at"] == [[TOPIC, 0, 6]]
    assert anomaly.detail["acked_offset_holds"] == "other"


def test_a_duplicate_from_an_idempotent_producer_is_an_anomaly() -> None:
    ops = [send(1.0, "v0", 0), send(2.0, "v1", 2, seq=1), final(0, "v0"), final(1, "v0")]
    ops.append(final(2, "v1"))
    result = check(ops)
    assert result.duplicates == 1 and kinds(result) == ["duplicate"]
    assert result.anomalies[0].detail["positions"] == [[TOPIC, 0, 0], [TOPIC, 0, 1]]


def writers(*batches: tuple[int, int, int, int, int], partition: int = 0) -> Op:
    """A producer-batches op: (first offset, last offset, producer id, epoch, base seq)."""
    return {
        "t": 1001.0,
        "process": "checker",
        "f": "producer-batches",
        "type": "ok",
        "topic": TOPIC,
        "partition": partition,
        "batches": [list(b) for b in batches],
    }


def test_a_duplicate_resent_under_a_bumped_epoch_is_counted_apart() -> None:
    # Chaos seed 29177: p0-0001058 at offset 1061 (producer 1000, epoch 0, seq 352) and
    # again at 1094 (epoch 1, seq 0) after librdkafka bumped its epoch; only the second
    # copy was acknowledged.
    ops = [send(1.0, "a", 3, seq=1), send(1.1, "b", 4, seq=2)]
    ops += [final(0, "a"), final(1, "b"), final(2, "x"), final(3, "a"), final(4, "b")]
    ops.append(send(1.2, "x", 2, idempotent=False))
    ops.append(writers((0, 1, 1000, 0, 352), (3, 4, 1000, 1, 0)))
    result = check(ops)
    assert result.ok, result.anomalies
    assert result.duplicates == 0 and result.duplicates_epoch_bump == 2
    assert CheckResult.from_json(result.to_json()).duplicates_epoch_bump == 2


def test_a_duplicate_under_one_producer_epoch_stays_an_anomaly() -> None:
    # Same producer id and epoch: the broker should have answered DUPLICATE_SEQUENCE_NUMBER.
    ops = [send(1.0, "a", 1), final(0, "a"), final(1, "a")]
    ops.append(writers((0, 0, 7, 2, 5), (1, 1, 7, 2, 5)))
    result = check(ops)
    assert result.duplicates == 1 and result.duplicates_epoch_bump == 0
    assert result.anomalies[0].detail["writers"] == [[7, 2, 5], [7, 2, 5]]


@pytest.mark.parametrize(
    "batches",
    [
        # Two producer ids: not one client's resend.
        [(0, 0, 7, 0, 5), (1, 1, 8, 1, 0)],
        # The later copy under the older epoch: not a resend after a bump.
        [(0, 0, 7, 1, 0), (1, 1, 7, 0, 5)],
        # One copy's writer unknown (no batch holds offset 1).
        [(0, 0, 7, 0, 5)],
        # Not an idempotent batch at all.
        [],
    ],
)
def test_a_duplicate_without_proof_of_an_epoch_bump_stays_an_anomaly(
    batches: list[tuple[int, int, int, int, int]],
) -> None:
    ops = [send(1.0, "a", 1), final(0, "a"), final(1, "a"), writers(*batches)]
    result = check(ops)
    assert result.duplicates == 1 and result.duplicates_epoch_bump == 0


def test_a_duplicate_from_a_non_idempotent_producer_is_legal() -> None:
    ops = [send(1.0, "v0", 1, idempotent=False), final(0, "v0"), final(1, "v0")]
    result = check(ops)
    assert result.ok
    assert result.duplicates == 0 and result.duplicates_non_idempotent == 1


def test_an_idempotent_producer_out_of_order_is_a_reorder() -> None:
    ops = [
        send(1.0, "a", 1, seq=0),
        send(1.1, "b", 0, seq=1),
        send(1.2, "c", 2, seq=2),
        final(0, "b"),
        final(1, "a"),
        final(2, "c"),
    ]
    result = check(ops)
    assert result.reordered == 1 and kinds(result) == ["reorder"]
    detail = result.anomalies[0].detail
    assert (detail["value"], detail["after_value"]) == ("a", "b")
    # The same log from a non-idempotent producer promises no order.
    plain = [dict(op, idempotent=False) if op["f"] == "send" else op for op in ops]
    assert check(plain).ok


def test_order_is_per_producer_and_per_partition() -> None:
    ops = [
        send(1.0, "a", 0, seq=5, producer="p0"),
        send(1.0, "b", 1, seq=1, producer="p1"),
        send(1.0, "c", 0, seq=6, producer="p0", partition=1),
        send(1.0, "d", 2, seq=2, producer="p0"),
        final(0, "a"),
        final(1, "b"),
        final(2, "d"),
        final(0, "c", partition=1),
    ]
    result = check(ops)
    # d (seq 2) after a (seq 5) in partition 0 is the only inversion.
    assert result.reordered == 1
    assert result.anomalies[0].detail["value"] == "d"


def test_a_divergent_replica_compare_is_a_divergence() -> None:
    result = check(clean_history()[:-4] + [compare(False)] + clean_history()[-3:])
    assert result.diverged == 1 and kinds(result) == ["divergence"]


def test_two_values_at_one_final_read_offset_is_a_divergence() -> None:
    ops = [send(1.0, "v0", 0), final(0, "v0"), final(0, "x")]
    assert check(ops).diverged == 1


def test_a_committed_offset_going_from_10_to_7_goes_backwards() -> None:
    observed = check([committed(1.0, 10), committed(2.0, 7)])
    assert observed.offsets_backwards == 1 and kinds(observed) == ["offset-backwards"]
    assert observed.anomalies[0].detail["before"] == 10
    assert observed.anomalies[0].detail["after"] == 7
    commits = check([commit(1.0, 10), commit(2.0, 7)])
    assert commits.offsets_backwards == 1
    assert check([commit(1.0, 7), commit(2.0, 10), committed(3.0, 10)]).ok


def test_an_observation_concurrent_with_a_commit_may_see_the_older_offset() -> None:
    # The fetch's response arrives after the commit's, but it may have been sent before.
    assert check([commit(1.0, 7), commit(2.0, 10), committed(2.5, 7)]).ok
    # Once the fetch was sent after the commit completed, it must see it.
    late = [commit(1.0, 7), commit(2.0, 10), committed(2.1, None, "invoke"), committed(2.5, 7)]
    result = check(late)
    assert result.offsets_backwards == 1
    assert result.anomalies[0].detail["stream"] == "committed-vs-commit"


def _consumed(offsets: list[int], present: list[int]) -> list[Op]:
    ops: list[Op] = [rebalance(0.0, "assign", "c0", [0])]
    ops += [poll(1.0 + i, o, f"v{o}") for i, o in enumerate(offsets)]
    ops += [final(o, f"v{o}") for o in present]
    return ops


def test_a_consumer_skipping_offset_3_that_exists_skipped_it() -> None:
    result = check(_consumed([0, 1, 2, 4, 5], [0, 1, 2, 3, 4, 5]))
    assert result.skipped == 1 and kinds(result) == ["skipped"]
    assert result.anomalies[0].detail["offset"] == 3
    assert result.anomalies[0].detail["rule"] == "gap"


def test_skipping_an_offset_absent_from_the_final_read_is_fine() -> None:
    assert check(_consumed([0, 1, 2, 4, 5], [0, 1, 2, 4, 5])).ok


def test_a_gap_across_a_rebalance_is_not_a_skip_by_itself() -> None:
    ops = _consumed([0, 1, 2], [0, 1, 2, 3, 4])
    ops += [rebalance(9.0, "revoke", "c0", [0]), rebalance(9.5, "assign", "c0", [0])]
    ops += [poll(10.0, 4, "v4")]
    assert check(ops).ok
    # ...but the group committing past 3 without anyone polling it is.
    result = check(ops + [commit(11.0, 5)])
    assert result.skipped == 1
    assert result.anomalies[0].detail == {
        "group": "g",
        "topic": TOPIC,
        "partition": 0,
        "offset": 3,
        "value": "v3",
        "rule": "below-commit",
        "committed": 5,
    }


def test_offsets_polled_by_another_member_are_not_skipped() -> None:
    ops = _consumed([0, 1], [0, 1, 2, 3])
    ops += [rebalance(5.0, "assign", "c1", [0]), poll(6.0, 2, "v2", consumer="c1")]
    ops += [poll(6.5, 3, "v3", consumer="c1"), commit(7.0, 4, consumer="c1")]
    assert check(ops).ok


def test_a_skip_counts_once_when_both_rules_see_it() -> None:
    ops = _consumed([0, 1, 2, 4], [0, 1, 2, 3, 4]) + [commit(9.0, 5)]
    assert check(ops).skipped == 1


def _oks(times: list[float]) -> list[Op]:
    return [send(t, f"v{i}", i, seq=i) for i, t in enumerate(times)]


def test_unavailability_and_recovery_are_measured_exactly() -> None:
    ops = _oks([0.0, 1.0, 2.0, 3.0, 7.0, 7.5, 8.0, 9.0, 20.0])
    ops += [fault(3.5, "kill", "start", 1), fault(6.0, "kill", "end", 1)]
    ops += [fault(8.5, "pause", "start", 2), fault(10.0, "pause", "end", 2)]
    result = check(ops, grace=2.0)
    # kill: window [3.5, 8.0]; oks at 7.0 and 7.5 inside: gaps 3.5, 0.5, 0.5.
    assert result.unavailability["kill"] == [3.5]
    assert result.recovery["kill"] == [1.0]
    # pause: window [8.5, 20.0] (grace ends at 12, but the next ok is at 20).
    assert result.unavailability["pause"] == [11.0]
    assert result.recovery["pause"] == [10.0]
    assert result.unrecovered == {}
    # grace=None: until the first ok after the end.
    assert check(ops, grace=None).unavailability["kill"] == [3.5]


def test_a_short_outage_inside_a_long_grace_is_measured_from_the_window_edges() -> None:
    ops = _oks([0.0, 1.0, 2.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    ops += [fault(4.0, "partition", "start", 1), fault(4.5, "partition", "end", 1)]
    result = check(ops, grace=3.0)
    # window [4.0, 7.5]: oks at 5, 6, 7 -> gaps 1, 1, 1, 0.5.
    assert result.unavailability["partition"] == [1.0]
    assert result.recovery["partition"] == [0.5]


def test_a_fault_never_recovered_from_is_counted() -> None:
    ops = _oks([0.0, 1.0]) + [fault(2.0, "zk-kill", "start", 1), fault(3.0, "zk-kill", "end", 1)]
    ops += [send(4.0, "x", type="fail", seq=2), send(8.0, "y", type="info", seq=3)]
    ops += [final(0, "v0", t=20.0), final(1, "v1", t=20.0)]
    result = check(ops, grace=2.0)
    assert result.unrecovered == {"zk-kill": 1}
    # Lower bounds, up to the last send attempt at 8.0.
    assert result.recovery["zk-kill"] == [5.0]
    assert result.unavailability["zk-kill"] == [6.0]


def test_silence_after_the_producers_stop_is_not_unavailability() -> None:
    ops = _oks([0.0, 1.0, 2.0, 3.0]) + [fault(2.5, "pause", "start", 1)]
    ops += [fault(2.6, "pause", "end", 1), final(0, "v0", t=50.0)]
    # grace 10 would reach 12.6, but the last send is at 3.0.
    assert check(ops).unavailability["pause"] == [0.5]


def test_fault_windows_pair_by_id_and_leave_unended_ones_open() -> None:
    ops = [
        fault(1.0, "kill", "start", 1),
        fault(2.0, "pause", "start", 2),
        fault(3.0, "kill", "end", 1),
    ]
    windows = fault_windows(ops, horizon=10.0)
    assert [(w.kind, w.start, w.end, w.ended) for w in windows] == [
        ("kill", 1.0, 3.0, True),
        ("pause", 2.0, 10.0, False),
    ]


def test_anomalies_are_capped_but_counts_are_exact() -> None:
    ops = [send(float(i), f"v{i}", i, seq=i) for i in range(50)]
    result = check(ops, max_anomalies_per_kind=5)
    assert result.lost == 50 and len(result.anomalies) == 5


# -- generated correct executions ------------------------------------------------------


@st.composite
def correct_histories(draw: st.DrawFn) -> tuple[list[Op], list[str]]:
    """A correct run: every ack in the log at its offset, contiguous consumption, monotone
    commits. Returns the ops and the acked values that occur once in the log."""
    partitions = draw(st.integers(1, 3))
    producers = draw(st.lists(st.booleans(), min_size=1, max_size=3))  # idempotent?
    consumers = draw(st.integers(1, 2))
    outcomes = st.sampled_from(["ok", "ok", "ok", "fail", "info-written", "info-lost", "dup"])
    steps = draw(
        st.lists(
            st.tuples(st.integers(0, len(producers) - 1), st.integers(0, partitions - 1), outcomes),
            min_size=1,
            max_size=60,
        )
    )
    ops: list[Op] = []
    logs: list[list[str]] = [[] for _ in range(partitions)]
    seqs = [0] * len(producers)
    t = 0.0
    for number, (producer, partition, outcome) in enumerate(steps):
        t += draw(st.sampled_from([0.01, 0.1, 0.5, 2.0]))
        idempotent = producers[producer]
        if outcome == "dup" and idempotent:
            outcome = "ok"
        value = f"p{producer}-{number}"
        log = logs[partition]
        kwargs: dict[str, Any] = {
            "partition": partition,
            "producer": f"p{producer}",
            "seq": seqs[producer],
            "idempotent": idempotent,
        }
        seqs[producer] += 1
        if outcome in ("ok", "dup"):
            if outcome == "dup":  # a retried non-idempotent send: the first try was written
                log.append(value)
            log.append(value)
            ops.append(send(t, value, len(log) - 1, **kwargs))
        elif outcome == "fail":
            ops.append(send(t, value, type="fail", **kwargs))
        else:
            if outcome == "info-written":
                log.append(value)
            ops.append(send(t, value, type="info", **kwargs))
    kinds_drawn = draw(st.lists(st.sampled_from(["kill", "pause", "partition"]), max_size=3))
    for fault_id, kind in enumerate(kinds_drawn):
        start = draw(st.floats(0.0, t, allow_nan=False))
        ops.append(fault(start, kind, "start", fault_id))
        ops.append(fault(start + draw(st.floats(0.0, 5.0)), kind, "end", fault_id))
    # Consumers: static assignment, contiguous polls, commits only of polled positions.
    t += 1.0
    for c in range(consumers):
        mine = [p for p in range(partitions) if p % consumers == c]
        ops.append(rebalance(t, "assign", f"c{c}", mine))
        for p in mine:
            for offset, value in enumerate(logs[p]):
                t += 0.01
                ops.append(poll(t, offset, value, consumer=f"c{c}", partition=p))
                if draw(st.integers(0, 4)) == 0:
                    ops.append(commit(t + 0.001, offset + 1, consumer=f"c{c}", partition=p))
                    ops.append(committed(t + 0.002, offset + 1, partition=p))
    for p, log in enumerate(logs):
        ops += [final(offset, value, partition=p, t=t + 1) for offset, value in enumerate(log)]
    once = [
        op["value"]
        for op in ops
        if op["f"] == "send"
        and op["type"] == "ok"
        and logs[op["partition"]].count(op["value"]) == 1
    ]
    draw(st.randoms()).shuffle(ops)  # the checker must not rely on line order
    return ops, once


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(correct_histories(), st.data())
def test_a_correct_execution_checks_ok_and_one_dropped_ack_is_one_loss(
    history: tuple[list[Op], list[str]], data: st.DataObject
) -> None:
    ops, once = history
    result = check(ops)
    assert result.ok, result.anomalies
    assert result.acked == sum(1 for op in ops if op["f"] == "send" and op["type"] == "ok")
    if not once:
        return
    dropped = data.draw(st.sampled_from(once))
    broken = [op for op in ops if not (op["f"] == "final-read" and op["value"] == dropped)]
    result = check(broken)
    assert result.lost == 1
    assert [(a.kind, a.detail["value"]) for a in result.anomalies] == [("lost", dropped)]
    assert all(getattr(result, name) == 0 for name in ("wrong_offset", "skipped", "reordered"))


# -- history files ----------------------------------------------------------------------


def test_history_round_trips_through_the_writer_from_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:

        def produce_stamped(n: int) -> None:
            for i in range(200):
                op = send(0.0, f"p{n}-{i}", i, seq=i, producer=f"p{n}")
                del op["t"]  # the writer stamps it
                writer.write(op)

        threads = [threading.Thread(target=produce_stamped, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        fault_id = writer.next_fault_id()
        writer.record("nemesis", "fault", "info", fault="kill", phase="start", fault_id=fault_id)
    ops = read_history(path)
    assert len(ops) == 801
    times = [op["t"] for op in ops]
    assert times == sorted(times) and all(isinstance(op["wall"], float) for op in ops)
    assert ops[-1]["fault_id"] == 1
    assert check(ops).acked == 800


def test_a_torn_last_line_is_dropped_but_corruption_elsewhere_is_an_error(
    tmp_path: Path,
) -> None:
    good = json.dumps(send(1.0, "v0", 0))
    path = tmp_path / "history.jsonl"
    path.write_text(f"{good}\n{good[:20]}\n")
    assert len(read_history(path)) == 1
    path.write_text(f"{good[:20]}\n{good}\n")
    with pytest.raises(HistoryFormatError):
        read_history(path)


def test_the_writer_refuses_an_ok_send_without_its_offset(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as writer, pytest.raises(HistoryFormatError):
        writer.write(send(1.0, "v0"))


# -- report -----------------------------------------------------------------------------


def test_summary_pools_windows_and_keeps_each_anomaly_seed(tmp_path: Path) -> None:
    first = check(
        _oks([0.0, 1.0, 4.0])
        + [final(i, f"v{i}") for i in range(3)]
        + [fault(1.5, "kill", "start", 1), fault(2.0, "kill", "end", 1)],
        seed=1,
    )
    second = check(clean_history() + [send(4.0, "gone", 9, seq=9)], seed=2)
    results = [
        ScheduleResult(1, 60.0, ["kill"], first, tmp_path / "1"),
        ScheduleResult(2, 60.0, [], second, tmp_path / "2"),
    ]
    summary = summarize(results, wall_seconds=180.0)
    assert summary["schedules"] == 2 and summary["lost"] == 1
    assert summary["acked"] == first.acked + second.acked
    assert summary["schedules_per_hour"] == 40.0
    assert summary["unavailability_s"]["kill"] == {"median": 2.5, "max": 2.5, "windows": 1}
    assert summary["recovery_s"]["kill"] == {"median": 2.0, "max": 2.0, "windows": 1}
    assert [(a["kind"], a["seed"]) for a in summary["anomalies"]] == [("lost", 2)]
    for key in ("duplicates", "diverged", "offsets_backwards", "skipped"):
        assert summary[key] == 0
    json.dumps(summary)
    console = Console(file=io.StringIO(), width=120)
    render_table(summary, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "kill" in text and "seed 2: lost" in text and "40.0/hour" in text


def test_any_anomaly_count_makes_the_result_not_ok() -> None:
    assert CheckResult().ok
    for kind in ANOMALY_KINDS:
        changes: dict[str, Any] = {COUNT_OF_KIND[kind]: 1}
        assert not replace(CheckResult(), **changes).ok
    assert CheckResult(lost_acks1=3, duplicates_non_idempotent=2, indeterminate=5).ok


def test_report_reads_finished_schedules_across_run_folders(tmp_path: Path) -> None:
    from strandline.chaos.report import SCHEDULE_FILE, load_results

    lossy = clean_history()
    lossy = [op for op in lossy if not (op["f"] == "final-read" and op["offset"] == 0)]
    for run, seed, ops in (("a", 3, clean_history()), ("b", 1, lossy)):
        folder = tmp_path / run / f"seed-{seed}"
        folder.mkdir(parents=True)
        (folder / "check.json").write_text(json.dumps(check(ops, seed=seed).to_json()))
        (folder / SCHEDULE_FILE).write_text(
            json.dumps({"seed": seed, "seconds": 40.0, "faults": ["kill", "pause"]})
        )
    (tmp_path / "b" / "seed-9").mkdir()  # unfinished: no check.json, not counted
    results = load_results([tmp_path / "a", tmp_path / "b"])
    assert [r.seed for r in results] == [1, 3]
    # A run cut short before its final read stays out even when rechecked; one that ended
    # but whose check crashed (no check.json) is checked by --recheck.
    cut, ended = tmp_path / "b" / "seed-10", tmp_path / "b" / "seed-11"
    for folder, ops in ((cut, lossy[:2]), (ended, [*clean_history(), compare(True)])):
        folder.mkdir()
        with HistoryWriter(folder / "history.jsonl") as writer:
            for op in ops:
                writer.write(op)
    assert [r.seed for r in load_results([tmp_path / "b"])] == [1]
    assert [r.seed for r in load_results([tmp_path / "b"], recheck=True)] == [1, 11]
    assert (ended / "check.json").exists() and not (cut / "check.json").exists()
    assert results[0].faults == ["kill", "pause"] and results[0].seconds == 40.0
    summary = summarize(results, wall_seconds=80.0)
    assert summary["schedules"] == 2 and summary["lost"] == results[0].check.lost >= 1
    assert [a["seed"] for a in summary["anomalies"]] == [1] * len(summary["anomalies"])
    assert summary["schedules_per_hour"] == pytest.approx(90.0)


def test_recheck_reads_the_writers_from_a_kept_schedules_segments(tmp_path: Path) -> None:
    """A history from before the runner recorded `producer-batches` (run 7's seeds 29177
    and 29175): --recheck reads the writers from the segments the failed schedule kept."""
    folder = tmp_path / "run" / "seed-5"
    tp = TopicPartition(TOPIC, 0)
    log = Log.open(
        folder / "cluster" / "broker-2" / "data" / tp.dir_name,
        tp,
        LogConfig(),
        recovery_point=0,
        log_start_offset=0,
        now_ms=0,
        clean_shutdown=False,
        writer=os.pwrite,
    )
    try:
        for epoch in (0, 1):  # written, then written again after an epoch bump
            log.append_as_leader(
                build_batch([b"a"], producer_id=9, producer_epoch=epoch, base_sequence=0), 0, 0
            )
    finally:
        log.close()
    ops = [send(1.0, "a", 1), final(0, "a"), final(1, "a")]
    ops.append({**compare(True), "high_watermark": 2, "brokers": [1, 2]})
    with HistoryWriter(folder / "history.jsonl") as writer:
        for op in ops:
            writer.write(op)
    (folder / "check.json").write_text(json.dumps(check(ops, seed=5).to_json()))
    assert [r.check.duplicates for r in load_results([tmp_path / "run"])] == [1]
    [result] = load_results([tmp_path / "run"], recheck=True)
    assert result.check.ok and result.check.duplicates_epoch_bump == 1


def test_worst_partition_unavailability_sees_one_stalled_partition() -> None:
    """Partition 0 acks every 0.5 s throughout; partition 1 stops from t=2 to t=5.5
    during a kill from 2 to 4: the cluster-wide gap is 0.5 s, the worst partition's 3.5 s."""
    ops: list[Op] = []
    offsets = [0, 0]
    for i in range(21):
        t = i * 0.5
        for partition in (0, 1):
            if partition == 1 and 2.0 < t < 5.5:
                continue
            value = f"v{partition}-{i}"
            ops.append(
                send(
                    t,
                    value,
                    offsets[partition],
                    partition=partition,
                    seq=i,
                    producer=f"p{partition}",
                )
            )
            ops.append(final(offsets[partition], value, partition=partition))
            offsets[partition] += 1
    ops += [fault(2.0, "kill", "start", 1), fault(4.0, "kill", "end", 1)]
    result = check(ops, grace=None)
    assert result.ok
    assert result.unavailability["kill"] == [pytest.approx(0.5)]
    assert result.partition_unavailability["kill"] == [pytest.approx(3.5)]
    assert CheckResult.from_json(result.to_json()).partition_unavailability == {
        "kill": [pytest.approx(3.5)]
    }
