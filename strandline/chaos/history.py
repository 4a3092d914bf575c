"""The history format of a chaos run: JSONL, one operation per line.

Every line is a JSON object with at least `t` (seconds since the writer was created,
time.monotonic), `wall` (time.time()), `process` (str), `f` and `type` (one of
"invoke", "ok", "fail", "info"). The remaining fields depend on `f`; the TypedDicts
below are the contract between the workload (which writes) and the checker, timeline
and report (which read). Ops stay plain dicts on both sides: a history can hold a
million lines and the checker indexes them into its own structures anyway.

`type` means what it means in Jepsen: "ok" the operation certainly happened, "fail" it
certainly did not, "info" unknown (a timeout: a send may or may not have been written).
Nemesis faults are always "info".

This module is the only one of the checker's that does I/O.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})

# One operation as read back: the checker reads fields by name, so a dict is the honest type.
Op = dict[str, Any]


class _Base(TypedDict):
    t: float
    wall: float
    process: str
    type: OpType


class SendOp(_Base):
    """A producer write. `value` is unique across the run; `seq` orders one producer's sends."""

    f: Literal["send"]
    topic: str
    partition: int
    key: str
    value: str
    producer: str
    seq: int
    idempotent: bool
    acks: Literal["all", "1"]
    # On "ok"; None when librdkafka acked it implicitly (a later batch of the same
    # idempotent producer succeeded), which tells that it was written, not where.
    offset: NotRequired[int | None]
    error: NotRequired[str]  # on "fail" / "info"


class PollOp(_Base):
    """A consumer received one record."""

    f: Literal["poll"]
    consumer: str
    group: str
    topic: str
    partition: int
    offset: int
    value: str
    generation: int | None


class RebalanceOp(_Base):
    """A rebalance callback (`f` is "assign" or "revoke"); partitions are [topic, partition]."""

    f: Literal["assign", "revoke"]
    consumer: str
    group: str
    partitions: list[list[Any]]


class CommitOp(_Base):
    """A consumer's offset commit; offsets are [topic, partition, next offset to consume]."""

    f: Literal["commit"]
    consumer: str
    group: str
    offsets: list[list[Any]]


class CommittedOp(_Base):
    """An observer's OffsetFetch of the group's committed offsets."""

    f: Literal["committed"]
    group: str
    offsets: list[list[Any]]


class AdminOp(_Base):
    f: Literal["admin"]
    action: str
    detail: dict[str, Any]


class FaultOp(_Base):
    """A nemesis fault's start or end (type "info"); a start and its end share `fault_id`."""

    f: Literal["fault"]
    fault: str
    phase: Literal["start", "end"]
    fault_id: int
    detail: dict[str, Any]


class FinalReadOp(_Base):
    """One record of the healed log, read back below the high watermark."""

    f: Literal["final-read"]
    topic: str
    partition: int
    offset: int
    value: str
    key: str


class ProducerBatchesOp(_Base):
    """The idempotent batches of a partition below its HW, read from a replica's segment
    files after the final read: [first offset, last offset, producer id, producer epoch,
    base sequence] each. The consumer API does not show who wrote a record; this does."""

    f: Literal["producer-batches"]
    topic: str
    partition: int
    batches: list[list[int]]


class ReplicaCompareOp(_Base):
    f: Literal["replica-compare"]
    topic: str
    partition: int
    high_watermark: int
    brokers: list[int]
    identical: bool
    detail: str


class StateChangeOp(_Base):
    """A line of interest copied from a broker's state-change.log (e.g. an unclean election)."""

    f: Literal["state-change"]
    broker: int
    event: str
    detail: str


# The fields each `f` must carry (besides the common ones). Optional fields are left out:
# `invoke` sends, for instance, have no offset yet.
REQUIRED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "send": ("topic", "partition", "value"),
    "poll": ("consumer", "group", "topic", "partition", "offset", "value"),
    "assign": ("consumer", "group", "partitions"),
    "revoke": ("consumer", "group", "partitions"),
    "commit": ("consumer", "group", "offsets"),
    "committed": ("group", "offsets"),
    "admin": ("action",),
    "fault": ("fault", "phase"),
    "final-read": ("topic", "partition", "offset", "value"),
    "producer-batches": ("topic", "partition", "batches"),
    "replica-compare": ("topic", "partition", "identical"),
    "state-change": ("event",),
}
COMMON_FIELDS = ("t", "process", "f", "type")


class HistoryFormatError(ValueError):
    pass


def validate(op: Mapping[str, Any], where: str | None = None) -> None:
    """Raise HistoryFormatError when `op` lacks a field its `f` needs (unknown `f`s pass)."""
    for name in COMMON_FIELDS:
        if name not in op:
            raise HistoryFormatError(f"{where or 'op'}: missing {name!r}: {dict(op)}")
    if op["type"] not in OP_TYPES:
        raise HistoryFormatError(f"{where or 'op'}: type {op['type']!r} not in {sorted(OP_TYPES)}")
    f = op["f"]
    if f == "send" and op["type"] == "ok" and "offset" not in op:
        raise HistoryFormatError(f"{where or 'op'}: an ok send needs its offset: {dict(op)}")
    for name in REQUIRED_FIELDS.get(f, ()):
        if name not in op:
            raise HistoryFormatError(f"{where or 'op'}: f={f!r} needs {name!r}: {dict(op)}")


class HistoryWriter:
    """Appends ops to a JSONL history; safe to share between the workload's threads.

    The lock covers stamping `t` and writing, so the file's line order is `t` order,
    except for ops that come stamped from where they happened (a consumer process's,
    `t_at`), which can reach the writer late: readers order by `t`, not by line.
    Each line is flushed at once: a run that dies mid-way still leaves a readable prefix.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._file = self.path.open("a", encoding="utf-8")
        self._next_fault_id = 0

    def now(self) -> float:
        """Seconds since the writer was created: the clock of every op's `t`."""
        return time.monotonic() - self._start

    def t_at(self, monotonic: float) -> float:
        """The `t` of something that happened at `time.monotonic()` == `monotonic`, in
        this process or another on the machine (an op stamped where it happened)."""
        return round(monotonic - self._start, 6)

    def next_fault_id(self) -> int:
        with self._lock:
            self._next_fault_id += 1
            return self._next_fault_id

    def write(self, op: Mapping[str, Any]) -> Op:
        """Stamp `t` (unless given) and `wall`, validate, append; returns the written op."""
        with self._lock:
            stamped: Op = dict(op)
            stamped.setdefault("t", round(self.now(), 6))
            stamped.setdefault("wall", time.time())
            validate(stamped)
            # allow_nan=False: NaN/Infinity are not JSON and would break other readers.
            self._file.write(json.dumps(stamped, separators=(",", ":"), allow_nan=False))
            self._file.write("\n")
            self._file.flush()
            return stamped

    def record(self, process: str, f: str, type: OpType, **fields: Any) -> Op:
        """Shorthand: `writer.record("p1", "send", "ok", topic=..., offset=5, ...)`."""
        return self.write({"process": process, "f": f, "type": type, **fields})

    def write_all(self, ops: Iterable[Mapping[str, Any]]) -> None:
        for op in ops:
            self.write(op)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_history(lines: Iterable[str], source: str = "history") -> list[Op]:
    """Parse JSONL lines into ops. A torn last line (the writer was killed mid-write) is
    dropped; a bad line anywhere else is an error, since it means the file is corrupt."""
    ops: list[Op] = []
    torn: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if torn is not None:
            raise HistoryFormatError(f"{source}:{torn}")
        try:
            op = json.loads(line)
        except json.JSONDecodeError as exc:
            torn = f"{number}: not JSON ({exc})"
            continue
        if not isinstance(op, dict):
            raise HistoryFormatError(f"{source}:{number}: not a JSON object")
        try:
            validate(op)
        except HistoryFormatError as exc:
            raise HistoryFormatError(f"{source}:{number}: {exc}") from None
        ops.append(op)
    return ops


def read_history(path: str | Path) -> list[Op]:
    with Path(path).open(encoding="utf-8") as file:
        return parse_history(file, str(path))
