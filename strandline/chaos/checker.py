"""The chaos checker: a history in, a verdict out (Jepsen's Kafka workload, adapted).

Pure: `check(ops)` reads a list of ops (see history.py) and builds no I/O. It indexes the
history into dicts once and never scans it quadratically, so a million-line history
checks in seconds. Ops are processed in `t` order (stable, so same-`t` ops keep file
order).

Rules, as implemented (each anomaly kind names the rule):

- "lost": an ok send whose value is nowhere in the final read. Kafka only promises
  durability for acks=all, so losses of acks="1" sends are counted apart in
  `lost_acks1` and are not anomalies unless `acks1_loss_is_anomaly=True`.
- "wrong-offset": an ok send whose value is in the final read but not at the acknowledged
  (topic, partition, offset) -- which also covers "the acked offset holds another value".
  A value absent from the final read is "lost", never also "wrong-offset". An ok send
  without an offset (librdkafka's "implicitly acked by subsequent batch success": an
  idempotent batch whose own answer was lost, known persisted because a later batch of
  the same producer succeeded) can only be lost, not misplaced.
- "duplicate": a value at more than one offset of the final read, sent by an idempotent
  producer. Duplicates from non-idempotent producers (or of values no send op names) are
  legal at-least-once retries: counted in `duplicates_non_idempotent`, not anomalies.
  When `producer-batches` ops say who wrote each copy, and every copy of the value was
  written by the same producer id under a strictly higher producer epoch than the copy
  before it, the client wrote it again after bumping its epoch (librdkafka's "drain and
  bump" renumbers batches that may already be written; confluentinc/librdkafka#4953). A
  broker cannot match batches of different epochs (Kafka's cannot either), so this is
  counted in `duplicates_epoch_bump`, not an anomaly. Copies under one epoch remain
  "duplicate": that would be the broker's duplicate detection failing.
- "reorder": per idempotent producer (and its optional `session` field: a producer that
  restarts with a new producer id only orders within one session) and final-read
  partition, each value's first offset is taken; walking offsets upwards, a record whose
  `seq` is below a `seq` already seen is out of order (one anomaly per such record, not
  per pair). Acked values absent from the final read have no position: already "lost".
- "divergence": a replica-compare with identical false; also two final-read ops giving
  different values for one offset (the reader saw two histories of one partition).
- "offset-backwards": per (group, topic, partition), two streams are checked separately,
  each ordered by `t`: ok `commit` ops, and `committed` observations. Either decreasing is
  an anomaly. The streams are not merged, because an observation's `t` is when its
  response arrived: an OffsetFetch sent before a concurrent commit may legally return the
  older offset although its `t` is later. When the observer logs its `committed` invoke
  (same process, before the ok), the observation is also checked against every ok commit
  whose response arrived before that invoke: it must be at least the highest of them.
- "skipped": (a) per (group, topic, partition), every final-read offset below the highest
  committed offset (ok commits and observations) must have been polled by some member of
  the group. This assumes the group starts from the beginning of the log
  (auto.offset.reset=earliest, a fresh group). (b) Per (consumer, topic, partition), two
  consecutive polls within one continuous assignment -- no assign/revoke of that
  partition for that consumer and no change of `generation` in between -- may only jump
  over offsets absent from the final read. `skipped` counts distinct
  (group, topic, partition, offset); both rules may name the same one.

Availability, per fault window (a fault's start and the end sharing its `fault_id`; a
start with no end lasts to the history's last `t`):

- recovery: from the fault's end to the first ok send at or after it. If no ok send ever
  follows, the time to the last send attempt is reported (a lower bound) and the window
  is counted in `unrecovered`.
- unavailability: the longest interval without an ok send (any producer) inside
  [start, end + grace], measured between consecutive ok-send `t`s and the window's edges.
  The window always reaches at least the first ok send after the end, so an outage that
  outlasts the grace is measured whole; grace=None means "until that first ok send".
  Windows never extend past the last send op (of any type): once the producers stop,
  silence is not unavailability. An unrecovered window's recovery is likewise measured
  up to that last send attempt.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strandline.chaos.history import Op

ANOMALY_KINDS: tuple[str, ...] = (
    "lost",
    "wrong-offset",
    "duplicate",
    "reorder",
    "divergence",
    "offset-backwards",
    "skipped",
)
# CheckResult's count attribute for each anomaly kind.
COUNT_OF_KIND: Mapping[str, str] = {
    "lost": "lost",
    "wrong-offset": "wrong_offset",
    "duplicate": "duplicates",
    "reorder": "reordered",
    "divergence": "diverged",
    "offset-backwards": "offsets_backwards",
    "skipped": "skipped",
}
DEFAULT_GRACE_S = 10.0
DEFAULT_MAX_ANOMALIES_PER_KIND = 100

TP = tuple[str, int]
# An idempotent batch of the final read: first offset, last offset, producer id, producer
# epoch, base sequence (a `producer-batches` op).
Batch = tuple[int, int, int, int, int]
_MAX_OFFSET = 1 << 62
GroupTP = tuple[str, str, int]


@dataclass(frozen=True)
class Anomaly:
    kind: str
    seed: int | None
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "seed": self.seed, "detail": self.detail}


@dataclass(frozen=True)
class FaultWindow:
    kind: str
    fault_id: Any
    start: float
    end: float
    ended: bool  # False when the history has no end op for this fault
    detail: dict[str, Any]


@dataclass(frozen=True)
class CheckResult:
    seed: int | None = None
    # Anomaly counts: `ok` needs every one of these at 0.
    lost: int = 0
    wrong_offset: int = 0
    duplicates: int = 0
    reordered: int = 0
    diverged: int = 0
    offsets_backwards: int = 0
    skipped: int = 0
    # Context: legal behaviour or facts about the run, never anomalies.
    acked: int = 0
    indeterminate: int = 0  # "info" sends never acked
    indeterminate_present: int = 0  # ...of which the final read holds the value
    failed: int = 0  # "fail" sends never acked
    failed_but_present: int = 0  # ...of which the final read holds the value anyway
    lost_acks1: int = 0
    duplicates_non_idempotent: int = 0
    # Idempotent duplicates the client wrote again under a bumped producer epoch
    # (see "duplicate" above): a client-side loss of idempotence, not the broker's.
    duplicates_epoch_bump: int = 0
    unknown_values: int = 0  # final-read values no send op names
    dirty_reads: int = 0  # polls of an offset whose final-read value differs or is absent
    final_read_records: int = 0
    polled: int = 0
    unclean_elections: int = 0  # state-change ops whose event mentions "unclean"
    anomalies: list[Anomaly] = field(default_factory=list)  # capped per kind; counts are exact
    unavailability: dict[str, list[float]] = field(default_factory=dict)
    # Per window, the longest gap of the worst partition (see `check`).
    partition_unavailability: dict[str, list[float]] = field(default_factory=dict)
    recovery: dict[str, list[float]] = field(default_factory=dict)
    unrecovered: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(getattr(self, name) == 0 for name in COUNT_OF_KIND.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = [a.to_json() for a in value] if name == "anomalies" else value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckResult:
        kwargs = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        kwargs["anomalies"] = [
            Anomaly(a["kind"], a.get("seed"), dict(a.get("detail", {})))
            for a in data.get("anomalies", [])
        ]
        return cls(**kwargs)


class _Anomalies:
    """Exact counts per kind, but a bounded list: a broken run can produce millions."""

    def __init__(self, seed: int | None, cap: int) -> None:
        self.seed = seed
        self.cap = cap
        self.counts: dict[str, int] = dict.fromkeys(ANOMALY_KINDS, 0)
        self.items: list[Anomaly] = []

    def add(self, kind: str, **detail: Any) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= self.cap:
            self.items.append(Anomaly(kind, self.seed, detail))


def _t(op: Op) -> float:
    return float(op["t"])


def check(
    ops: Iterable[Op],
    *,
    seed: int | None = None,
    grace: float | None = DEFAULT_GRACE_S,
    acks1_loss_is_anomaly: bool = False,
    max_anomalies_per_kind: int = DEFAULT_MAX_ANOMALIES_PER_KIND,
) -> CheckResult:
    ordered = sorted(ops, key=_t)
    found = _Anomalies(seed, max_anomalies_per_kind)

    sent: dict[str, Op] = {}  # value -> the first send op naming it (for producer metadata)
    acked: dict[str, Op] = {}  # value -> its first ok send
    failed: set[str] = set()
    indeterminate: set[str] = set()
    ok_times: list[float] = []
    ok_times_by_tp: dict[TP, list[float]] = defaultdict(list)
    last_send = 0.0
    final: dict[TP, dict[int, str]] = defaultdict(dict)
    positions: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    consumer_ops: list[Op] = []
    fault_ops: list[Op] = []
    writers: dict[TP, list[Batch]] = {}
    unclean = 0

    for op in ordered:
        f = op["f"]
        if f == "send":
            value = op["value"]
            sent.setdefault(value, op)
            last_send = _t(op)
            kind = op["type"]
            if kind == "ok":
                ok_times.append(_t(op))
                ok_times_by_tp[(op["topic"], op["partition"])].append(_t(op))
                acked.setdefault(value, op)
            elif kind == "fail":
                failed.add(value)
            elif kind == "info":
                indeterminate.add(value)
        elif f == "final-read":
            tp = (op["topic"], int(op["partition"]))
            offset = int(op["offset"])
            value = op["value"]
            records = final[tp]
            held = records.get(offset)
            if held is None:
                records[offset] = value
                positions[value].append((tp[0], tp[1], offset))
            elif held != value:
                found.add(
                    "divergence",
                    topic=tp[0],
                    partition=tp[1],
                    offset=offset,
                    values=[held, value],
                    reason="the final read returned two values for one offset",
                )
        elif f in ("poll", "assign", "revoke", "commit", "committed"):
            consumer_ops.append(op)
        elif f == "fault":
            fault_ops.append(op)
        elif f == "producer-batches":
            writers[(op["topic"], int(op["partition"]))] = sorted(
                (int(b[0]), int(b[1]), int(b[2]), int(b[3]), int(b[4])) for b in op["batches"]
            )
        elif f == "replica-compare":
            if not op["identical"]:
                found.add(
                    "divergence",
                    topic=op["topic"],
                    partition=op["partition"],
                    high_watermark=op.get("high_watermark"),
                    brokers=op.get("brokers"),
                    reason=op.get("detail", ""),
                )
        elif f == "state-change":
            if "unclean" in str(op.get("event", "")).lower():
                unclean += 1

    lost_acks1 = _check_acked(acked, final, positions, found, acks1_loss_is_anomaly)
    dup_legal, dup_epoch_bump = _check_duplicates(sent, positions, found, writers)
    _check_reorder(sent, positions, found)
    polled, dirty = _check_consumers(consumer_ops, final, found)

    horizon = _t(ordered[-1]) if ordered else 0.0
    windows = fault_windows(fault_ops, horizon=horizon)
    unavailability, recovery, unrecovered = _availability(windows, ok_times, last_send, grace)
    # The same measure per partition, worst partition per window: a fault that stops
    # one partition while the others go on is invisible in the cluster-wide figure.
    partition_unavailability: dict[str, list[float]] = {}
    for times in ok_times_by_tp.values():
        per_tp, _recovery, _unrecovered = _availability(windows, times, last_send, grace)
        for kind, values in per_tp.items():
            worst = partition_unavailability.setdefault(kind, [0.0] * len(values))
            for i, value in enumerate(values):
                worst[i] = max(worst[i], value)

    unacked_info = indeterminate - acked.keys()
    unacked_failed = failed - acked.keys()
    counts = found.counts
    return CheckResult(
        seed=seed,
        lost=counts["lost"],
        wrong_offset=counts["wrong-offset"],
        duplicates=counts["duplicate"],
        reordered=counts["reorder"],
        diverged=counts["divergence"],
        offsets_backwards=counts["offset-backwards"],
        skipped=counts["skipped"],
        acked=len(acked),
        indeterminate=len(unacked_info),
        indeterminate_present=sum(1 for v in unacked_info if v in positions),
        failed=len(unacked_failed),
        failed_but_present=sum(1 for v in unacked_failed if v in positions),
        lost_acks1=lost_acks1,
        duplicates_non_idempotent=dup_legal,
        duplicates_epoch_bump=dup_epoch_bump,
        unknown_values=sum(1 for v in positions if v not in sent),
        dirty_reads=dirty,
        final_read_records=sum(len(records) for records in final.values()),
        polled=polled,
        unclean_elections=unclean,
        anomalies=found.items,
        unavailability=unavailability,
        partition_unavailability=partition_unavailability,
        recovery=recovery,
        unrecovered=unrecovered,
    )


def _check_acked(
    acked: Mapping[str, Op],
    final: Mapping[TP, dict[int, str]],
    positions: Mapping[str, list[tuple[str, int, int]]],
    found: _Anomalies,
    acks1_loss_is_anomaly: bool,
) -> int:
    lost_acks1 = 0
    for value, op in acked.items():
        tp = (op["topic"], int(op["partition"]))
        offset = None if op.get("offset") is None else int(op["offset"])
        where = positions.get(value)
        if not where:
            if str(op.get("acks", "all")) == "1" and not acks1_loss_is_anomaly:
                lost_acks1 += 1
                continue
            found.add(
                "lost",
                value=value,
                topic=tp[0],
                partition=tp[1],
                offset=offset,
                producer=op.get("producer"),
                acks=op.get("acks"),
                t=op["t"],
                offset_now_holds=None if offset is None else final.get(tp, {}).get(offset),
            )
            continue
        if offset is None:
            continue
        held = final.get(tp, {}).get(offset)
        if held != value:
            found.add(
                "wrong-offset",
                value=value,
                topic=tp[0],
                partition=tp[1],
                acked_offset=offset,
                found_at=[list(p) for p in where],
                acked_offset_holds=held,
                producer=op.get("producer"),
            )
    return lost_acks1


def _check_duplicates(
    sent: Mapping[str, Op],
    positions: Mapping[str, list[tuple[str, int, int]]],
    found: _Anomalies,
    writers: Mapping[TP, list[Batch]],
) -> tuple[int, int]:
    """(legal non-idempotent duplicates, idempotent ones resent under a bumped epoch)."""
    legal = 0
    epoch_bump = 0
    for value, where in positions.items():
        if len(where) < 2:
            continue
        op = sent.get(value)
        if op is None or not op.get("idempotent"):
            legal += 1
        elif _resent_under_new_epochs(where, writers):
            epoch_bump += 1
        else:
            found.add(
                "duplicate",
                value=value,
                producer=op.get("producer"),
                positions=[list(p) for p in where],
                writers=[_writer_of(writers, (p[0], p[1]), p[2]) for p in where],
            )
    return legal, epoch_bump


def _writer_of(writers: Mapping[TP, list[Batch]], tp: TP, offset: int) -> list[int] | None:
    """[producer id, producer epoch, sequence] of the record at `offset`, when known."""
    batches = writers.get(tp)
    if not batches:
        return None
    i = bisect_right(batches, (offset, _MAX_OFFSET)) - 1
    if i < 0:
        return None
    first, last, producer_id, producer_epoch, base_sequence = batches[i]
    if offset > last:
        return None
    return [producer_id, producer_epoch, base_sequence + offset - first]


def _resent_under_new_epochs(
    where: list[tuple[str, int, int]], writers: Mapping[TP, list[Batch]]
) -> bool:
    """Every copy in one partition, by one producer id, each later copy (by offset) under
    a strictly higher producer epoch than the one before: a client resend after an epoch
    bump, which no broker can recognise as a duplicate."""
    if len({(topic, partition) for topic, partition, _ in where}) != 1:
        return False
    copies = [_writer_of(writers, (t, p), o) for t, p, o in sorted(where)]
    if any(c is None for c in copies):
        return False
    known = [c for c in copies if c is not None]
    if len({c[0] for c in known}) != 1:
        return False
    return all(a[1] < b[1] for a, b in zip(known, known[1:], strict=False))


def _check_reorder(
    sent: Mapping[str, Op],
    positions: Mapping[str, list[tuple[str, int, int]]],
    found: _Anomalies,
) -> None:
    streams: dict[tuple[str, str, str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for value, where in positions.items():
        op = sent.get(value)
        if op is None or not op.get("idempotent") or op.get("seq") is None:
            continue
        first: dict[TP, int] = {}
        for topic, partition, offset in where:
            tp = (topic, partition)
            if tp not in first or offset < first[tp]:
                first[tp] = offset
        for (topic, partition), offset in first.items():
            stream = (str(op.get("producer")), str(op.get("session", "")), topic, partition)
            streams[stream].append((offset, int(op["seq"]), value))
    for (producer, session, topic, partition), records in streams.items():
        records.sort()
        top_seq, top_offset, top_value = -1, -1, ""
        for offset, seq, value in records:
            if seq < top_seq:
                found.add(
                    "reorder",
                    producer=producer,
                    session=session or None,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    seq=seq,
                    value=value,
                    after_offset=top_offset,
                    after_seq=top_seq,
                    after_value=top_value,
                )
            elif seq > top_seq:
                top_seq, top_offset, top_value = seq, offset, value


def _entries(op: Op) -> list[tuple[str, int, int]]:
    return [(str(e[0]), int(e[1]), int(e[2])) for e in op.get("offsets") or ()]


def _check_consumers(
    consumer_ops: list[Op],
    final: Mapping[TP, dict[int, str]],
    found: _Anomalies,
) -> tuple[int, int]:
    """Offsets-backwards and skipped; returns (polls seen, dirty reads)."""
    sorted_offsets: dict[TP, list[int]] = {tp: sorted(records) for tp, records in final.items()}
    polled: dict[GroupTP, set[int]] = defaultdict(set)
    # (consumer, topic, partition) -> (last polled offset, its generation); reset on rebalance.
    last_poll: dict[tuple[str, str, int], tuple[int, Any]] = {}
    last_commit: dict[GroupTP, int] = {}
    last_observed: dict[GroupTP, int] = {}
    highest_committed: dict[GroupTP, int] = {}
    # group -> (topic, partition) -> highest ok commit so far (for the invoke cross-check)
    commits_so_far: dict[str, dict[TP, int]] = defaultdict(dict)
    pending_fetch: dict[tuple[str, str], dict[TP, int]] = {}
    skipped: set[tuple[str, str, int, int]] = set()
    polls = dirty = 0

    def skip(group: str, topic: str, partition: int, offset: int, **why: Any) -> None:
        key = (group, topic, partition, offset)
        if key not in skipped:
            skipped.add(key)
            found.add(
                "skipped",
                group=group,
                topic=topic,
                partition=partition,
                offset=offset,
                value=final[(topic, partition)][offset],
                **why,
            )

    for op in consumer_ops:
        f = op["f"]
        kind = op["type"]
        if f == "poll":
            if kind != "ok" and kind != "info":
                continue
            polls += 1
            group, consumer = str(op["group"]), str(op["consumer"])
            tp = (str(op["topic"]), int(op["partition"]))
            offset = int(op["offset"])
            polled[(group, tp[0], tp[1])].add(offset)
            if final.get(tp, {}).get(offset) != op["value"]:
                dirty += 1
            generation = op.get("generation")
            member = (consumer, tp[0], tp[1])
            previous = last_poll.get(member)
            last_poll[member] = (offset, generation)
            if previous is None or offset <= previous[0] + 1:
                continue
            if previous[1] is not None and generation is not None and previous[1] != generation:
                continue
            existing = sorted_offsets.get(tp, [])
            lo = bisect_right(existing, previous[0])
            hi = bisect_left(existing, offset)
            for missing in existing[lo:hi]:
                skip(
                    group,
                    tp[0],
                    tp[1],
                    missing,
                    rule="gap",
                    consumer=consumer,
                    polled_before=previous[0],
                    polled_after=offset,
                )
        elif f in ("assign", "revoke"):
            consumer = str(op["consumer"])
            for topic, partition in op.get("partitions") or ():
                last_poll.pop((consumer, str(topic), int(partition)), None)
        elif f == "commit":
            if kind != "ok":
                continue
            group = str(op["group"])
            for topic, partition, offset in _entries(op):
                key = (group, topic, partition)
                before = last_commit.get(key)
                if before is not None and offset < before:
                    found.add(
                        "offset-backwards",
                        stream="commit",
                        group=group,
                        topic=topic,
                        partition=partition,
                        before=before,
                        after=offset,
                        consumer=op.get("consumer"),
                        t=op["t"],
                    )
                last_commit[key] = offset
                highest_committed[key] = max(highest_committed.get(key, offset), offset)
                so_far = commits_so_far[group]
                so_far[(topic, partition)] = max(so_far.get((topic, partition), offset), offset)
        elif f == "committed":
            group = str(op["group"])
            fetcher = (str(op["process"]), group)
            if kind == "invoke":
                pending_fetch[fetcher] = dict(commits_so_far[group])
                continue
            floor = pending_fetch.pop(fetcher, {})
            if kind != "ok":
                continue
            for topic, partition, offset in _entries(op):
                key = (group, topic, partition)
                before = last_observed.get(key)
                if before is not None and offset < before:
                    found.add(
                        "offset-backwards",
                        stream="committed",
                        group=group,
                        topic=topic,
                        partition=partition,
                        before=before,
                        after=offset,
                        t=op["t"],
                    )
                elif offset < floor.get((topic, partition), offset):
                    found.add(
                        "offset-backwards",
                        stream="committed-vs-commit",
                        group=group,
                        topic=topic,
                        partition=partition,
                        before=floor[(topic, partition)],
                        after=offset,
                        t=op["t"],
                    )
                last_observed[key] = offset
                highest_committed[key] = max(highest_committed.get(key, offset), offset)

    for (group, topic, partition), committed in highest_committed.items():
        seen = polled.get((group, topic, partition), set())
        existing = sorted_offsets.get((topic, partition), [])
        for offset in existing[: bisect_left(existing, committed)]:
            if offset not in seen:
                skip(group, topic, partition, offset, rule="below-commit", committed=committed)
    return polls, dirty


def _as_dict(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return dict(detail)
    return {} if detail is None else {"detail": detail}


def fault_windows(ops: Iterable[Op], *, horizon: float | None = None) -> list[FaultWindow]:
    """Pair fault starts with their ends by `fault_id` (or, lacking one, by kind and process,
    first in first out). A start never ended lasts until `horizon` (default: its own `t`)."""
    starts: dict[Any, Op] = {}
    unkeyed: dict[tuple[str, str], list[Op]] = defaultdict(list)
    windows: list[FaultWindow] = []

    def close(start: Op, end_t: float, ended: bool) -> None:
        windows.append(
            FaultWindow(
                kind=str(start["fault"]),
                fault_id=start.get("fault_id"),
                start=_t(start),
                end=max(end_t, _t(start)),
                ended=ended,
                detail=_as_dict(start.get("detail")),
            )
        )

    for op in sorted((o for o in ops if o["f"] == "fault"), key=_t):
        fault_id = op.get("fault_id")
        phase = op.get("phase")
        if phase == "start":
            if fault_id is None:
                unkeyed[(str(op["fault"]), str(op["process"]))].append(op)
            else:
                starts[fault_id] = op
        elif phase == "end":
            if fault_id is None:
                queue = unkeyed.get((str(op["fault"]), str(op["process"])))
                start = queue.pop(0) if queue else None
            else:
                start = starts.pop(fault_id, None)
            if start is not None:
                close(start, _t(op), True)
    leftovers = list(starts.values()) + [op for queue in unkeyed.values() for op in queue]
    for start in leftovers:
        close(start, _t(start) if horizon is None else horizon, False)
    windows.sort(key=lambda w: w.start)
    return windows


def _availability(
    windows: list[FaultWindow],
    ok_times: list[float],
    horizon: float,
    grace: float | None,
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]:
    unavailability: dict[str, list[float]] = defaultdict(list)
    recovery: dict[str, list[float]] = defaultdict(list)
    unrecovered: dict[str, int] = {}
    for window in windows:
        after = bisect_left(ok_times, window.end)
        first_ok = ok_times[after] if after < len(ok_times) else None
        if first_ok is None:
            recovery[window.kind].append(max(horizon - window.end, 0.0))
            unrecovered[window.kind] = unrecovered.get(window.kind, 0) + 1
            edge = max(horizon, window.end)
        else:
            recovery[window.kind].append(first_ok - window.end)
            edge = first_ok if grace is None else max(window.end + grace, first_ok)
            edge = min(edge, max(horizon, first_ok))
        lo = bisect_right(ok_times, window.start)
        hi = bisect_left(ok_times, edge)
        longest = 0.0
        previous = window.start
        for t in ok_times[lo:hi]:
            longest = max(longest, t - previous)
            previous = t
        longest = max(longest, edge - previous)
        unavailability[window.kind].append(longest)
    return dict(unavailability), dict(recovery), unrecovered
