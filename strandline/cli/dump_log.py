"""`strandline dump-log`: print what a partition directory's files hold (kafka-dump-log.sh).

Segments (`.log`), offset and time indexes, producer-state snapshots and the checkpoint
files are read with the storage layer's own readers, so the tool sees exactly what a
broker would. Nothing is opened for writing: it is safe on a running broker's files.

Problems (a torn or CRC-invalid batch, an index out of order, a malformed checkpoint)
are shown where they occur, with the file position or entry number; the dump goes on
wherever the damaged part's extent is still known, and the exit code is 1 if anything
was wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from strandline.cli import tool_console
from strandline.errors import KafkaError
from strandline.protocol.record_batch import (
    CODEC_NAMES,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc,
    read_header,
)
from strandline.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_offsets,
)
from strandline.storage.cleaner import batch_records
from strandline.storage.index import OffsetIndex, TimeIndex
from strandline.storage.leader_epoch_cache import LeaderEpochCache, parse_checkpoint
from strandline.storage.producer_state import (
    NO_PRODUCER_ID,
    ProducerStateManager,
    SnapshotError,
    last_sequence,
)
from strandline.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    segment_file_name,
)

SEGMENT = "segment"
OFFSET_INDEX = "offset-index"
TIME_INDEX = "time-index"
PRODUCER_SNAPSHOT = "producer-snapshot"
LEADER_EPOCHS = "leader-epoch-checkpoint"
OFFSET_CHECKPOINT = "offset-checkpoint"
UNREADABLE = "unreadable"

_BY_SUFFIX = {
    LOG_SUFFIX: SEGMENT,
    INDEX_SUFFIX: OFFSET_INDEX,
    TIMEINDEX_SUFFIX: TIME_INDEX,
    ".snapshot": PRODUCER_SNAPSHOT,
}
_OFFSET_CHECKPOINTS = {
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
}
# Segment files keep their kind while the broker deletes, cleans or swaps them.
_TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_KNOWN = "<offset>.log, .index, .timeindex, .snapshot, or a checkpoint file"
_ERRORS_SHOWN_PER_FILE = 10


@dataclass
class Dump:
    """One file's dump: what it holds (`body`, JSON-ready) and what is wrong with it."""

    path: Path
    kind: str
    body: dict[str, Any] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)

    def problem(self, error: str, **where: int) -> None:
        """Note what is wrong, and where (`position=` in a segment, `entry=` in an index)."""
        self.problems.append({**where, "error": error})

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.path), "type": self.kind, **self.body, "problems": self.problems}


def file_kind(path: Path) -> str | None:
    """What `path` holds, judged by its name as the broker names its files."""
    name = path.name
    for suffix in _TRANSIENT_SUFFIXES:
        name = name.removesuffix(suffix)
    if name == LEADER_EPOCH_CHECKPOINT:
        return LEADER_EPOCHS
    if name in _OFFSET_CHECKPOINTS:
        return OFFSET_CHECKPOINT
    stem, dot, suffix = name.partition(".")
    kind = _BY_SUFFIX.get(dot + suffix)
    # A digit stem keeps `state-change.log` and friends from being read as segments.
    return kind if kind is not None and stem.isdigit() else None


def base_offset_of(path: Path) -> int:
    return int(path.name.partition(".")[0])


def escape_bytes(data: bytes | None) -> str | None:
    """Key or value as one line of text: UTF-8 where it is, `\\xNN` for other bytes,
    backslash escapes for control characters, so no two payloads print alike."""
    if data is None:
        return None
    out = []
    for ch in bytes(data).decode("utf-8", "surrogateescape"):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, smuggled by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


# --- segments ---------------------------------------------------------------------------


def _timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.is_log_append_time else "CreateTime"


def _batch_json(header: BatchHeader, computed_crc: int) -> dict[str, Any]:
    has_sequence = header.producer_id != NO_PRODUCER_ID and header.base_sequence >= 0
    return {
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "count": header.record_count,
        "position": header.position,
        "size": header.size,
        "magic": header.magic,
        "compression": CODEC_NAMES.get(header.compression_codec, str(header.compression_codec)),
        "crc": header.crc,
        "crc_valid": computed_crc == header.crc,
        "partition_leader_epoch": header.partition_leader_epoch,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "last_sequence": (
            last_sequence(header.base_sequence, header.last_offset_delta) if has_sequence else -1
        ),
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
        "timestamp_type": _timestamp_type(header),
        "base_timestamp": header.base_timestamp,
        "max_timestamp": header.max_timestamp,
    }


def _records_json(
    data: bytes, header: BatchHeader, *, print_data: bool, dump: Dump
) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    has_sequence = header.producer_id != NO_PRODUCER_ID and header.base_sequence >= 0
    try:
        for record in batch_records(data, header):
            delta = record.offset - header.base_offset
            entry: dict[str, Any] = {
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key_size": -1 if record.key is None else len(record.key),
                "value_size": -1 if record.value is None else len(record.value),
                "headers": len(record.headers),
                "sequence": last_sequence(header.base_sequence, delta) if has_sequence else -1,
            }
            entry["header_keys"] = [key for key, _ in record.headers]
            if header.is_control:
                entry["control_type"] = _CONTROL_TYPES.get(record.type, f"UNKNOWN({record.type})")
                entry["coordinator_epoch"] = _coordinator_epoch(record.value)
            if print_data:
                entry["key"] = escape_bytes(record.key)
                entry["value"] = escape_bytes(record.value)
            records.append(entry)
    # kafka-python reports bad record bytes with its own error types, the codecs with
    # theirs and struct with struct.error: whichever it is, the batch is unreadable.
    except Exception as exc:  # noqa: BLE001
        dump.problem(
            f"records of the batch at position {header.position} cannot be decoded "
            f"after {len(records)} of {header.record_count}: {exc}",
            position=header.position,
        )
    return records


def _coordinator_epoch(value: bytes | None) -> int | None:
    """An end transaction marker's value: version (int16), coordinator epoch (int32)."""
    if value is None or len(value) < 6:
        return None
    return int.from_bytes(value[2:6], "big", signed=True)


def segment_batches(
    data: bytes, dump: Dump, *, deep: bool, print_data: bool
) -> Iterator[dict[str, Any]]:
    """Each batch of a segment's bytes, in file order; problems go to `dump`.

    A CRC mismatch leaves the batch's length trusted, so the walk goes on after it; a
    torn batch, an impossible length or an unknown magic leaves nothing to trust after
    it, and the walk stops there.
    """
    pos = 0
    next_offset: int | None = None
    while pos < len(data):
        try:
            header = read_header(data, pos, verify_crc=False)
        except KafkaError as exc:
            dump.problem(f"{exc}; the last {len(data) - pos} bytes are not dumped", position=pos)
            return
        computed = batch_crc(data, header)
        batch = _batch_json(header, computed)
        if computed != header.crc:
            dump.problem(
                f"CRC mismatch in the batch at position {pos} (offsets {header.base_offset}"
                f"..{header.last_offset}): stored {header.crc}, computed {computed}",
                position=pos,
            )
        if next_offset is not None and header.base_offset < next_offset:
            dump.problem(
                f"the batch at position {pos} starts at offset {header.base_offset}, "
                f"below the previous batch's end {next_offset}",
                position=pos,
            )
        if deep:
            # Records of a batch whose CRC fails are bytes nobody can vouch for.
            batch["records"] = (
                _records_json(data, header, print_data=print_data, dump=dump)
                if computed == header.crc
                else None
            )
        yield batch
        next_offset = header.next_offset
        pos += header.size


def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: dict[str, Any]) -> str:
    """kafka-dump-log.sh's batch line, its fields in its order (DumpLogSegments'
    printBatchLevel); a delete horizon is only ever set by a cleaner, which this log's
    batches never carry, so it is always empty."""
    return (
        f"baseOffset: {batch['base_offset']} lastOffset: {batch['last_offset']} "
        f"count: {batch['count']} baseSequence: {batch['base_sequence']} "
        f"lastSequence: {batch['last_sequence']} producerId: {batch['producer_id']} "
        f"producerEpoch: {batch['producer_epoch']} "
        f"partitionLeaderEpoch: {batch['partition_leader_epoch']} "
        f"isTransactional: {_bool(batch['is_transactional'])} "
        f"isControl: {_bool(batch['is_control'])} deleteHorizonMs: OptionalLong.empty "
        f"position: {batch['position']} {batch['timestamp_type']}: {batch['max_timestamp']} "
        f"size: {batch['size']} magic: {batch['magic']} "
        f"compresscodec: {batch['compression']} crc: {batch['crc']} "
        f"isvalid: {_bool(batch['crc_valid'])}"
    )


def record_line(record: dict[str, Any], timestamp_type: str) -> str:
    """kafka-dump-log.sh's record line: `| offset: ... sequence: S headerKeys: [...]`, an
    end marker's type, and with --print-data-log the key (when there is one) and payload
    (when there is one)."""
    line = (
        f"| offset: {record['offset']} {timestamp_type}: {record['timestamp']} "
        f"keySize: {record['key_size']} valueSize: {record['value_size']} "
        f"sequence: {record['sequence']} headerKeys: [{','.join(record['header_keys'])}]"
    )
    if "control_type" in record:
        line += f" endTxnMarker: {record['control_type']}"
        if record.get("coordinator_epoch") is not None:
            line += f" coordinatorEpoch: {record['coordinator_epoch']}"
    elif "key" in record:
        if record["key"] is not None:
            line += f" key: {record['key']}"
        if record["value"] is not None:
            line += f" payload: {record['value']}"
    return line


# --- indexes ----------------------------------------------------------------------------


def _batch_at(fd: int, position: int) -> BatchHeader | None:
    """The header of the whole batch starting at `position` of an open segment file,
    None if no valid one starts there. Reads only that batch."""
    head = os.pread(fd, HEADER_SIZE, position)
    if len(head) < HEADER_SIZE:
        return None
    batch_length = HEADER.unpack_from(head)[1]
    whole = os.pread(fd, LOG_OVERHEAD + max(batch_length, 0), position)
    try:
        return read_header(whole, 0, verify_crc=False)._replace(position=position)
    except KafkaError:
        return None


def dump_offset_index(path: Path, data: bytes, dump: Dump) -> None:
    base = base_offset_of(path)
    entries = OffsetIndex.decode(data)
    dump.body["base_offset"] = base
    dump.body["entries"] = [
        {"offset": base + rel, "relative_offset": rel, "position": pos} for rel, pos in entries
    ]
    _order_problems(OffsetIndex, entries, dump)
    _torn_entry(data, OffsetIndex.ENTRY.size, len(entries), dump)
    log = path.with_name(segment_file_name(base, LOG_SUFFIX))
    try:
        fd = os.open(log, os.O_RDONLY)
    except OSError:
        return  # an index on its own: nothing to check it against
    try:
        # Each entry must name the start of a batch ending at its offset: that is how
        # the segment writes it, and what a fetch through the index relies on.
        for i, (rel, pos) in enumerate(entries):
            header = _batch_at(fd, pos)
            if header is None:
                dump.problem(
                    f"entry {i} (offset {base + rel}) points at position {pos} of {log.name}, "
                    "where no valid batch starts",
                    entry=i,
                )
            elif header.last_offset != base + rel:
                dump.problem(
                    f"entry {i} says offset {base + rel} is at position {pos} of {log.name}, "
                    f"but the batch there ends at offset {header.last_offset}",
                    entry=i,
                )
    finally:
        os.close(fd)


def dump_time_index(path: Path, data: bytes, dump: Dump) -> None:
    base = base_offset_of(path)
    entries = TimeIndex.decode(data)
    dump.body["base_offset"] = base
    dump.body["entries"] = [
        {"timestamp": ts, "offset": base + rel, "relative_offset": rel} for ts, rel in entries
    ]
    _order_problems(TimeIndex, entries, dump)
    _torn_entry(data, TimeIndex.ENTRY.size, len(entries), dump)


def _order_problems(
    index: type[OffsetIndex] | type[TimeIndex], entries: list[tuple[int, int]], dump: Dump
) -> None:
    keys = [key for key, _ in entries]
    values = [value for _, value in entries]
    for i, problem in sorted(index.ordering_problems(keys, values)):
        dump.problem(f"entry {i} {problem} (a broker would rebuild this index)", entry=i)


def _torn_entry(data: bytes, entry_size: int, whole: int, dump: Dump) -> None:
    extra = len(data) % entry_size
    if extra:
        dump.problem(
            f"{extra} bytes after the last whole entry (entries are {entry_size} bytes)",
            entry=whole,
        )


# --- producer snapshots and checkpoints ---------------------------------------------------


def dump_producer_snapshot(data: bytes, dump: Dump) -> None:
    try:
        state = ProducerStateManager.from_snapshot(data)
    except SnapshotError as exc:
        dump.problem(str(exc))
        return
    dump.body["map_end_offset"] = state.map_end_offset
    dump.body["producers"] = [
        {
            "producer_id": entry.producer_id,
            "producer_epoch": entry.producer_epoch,
            "last_timestamp": entry.last_timestamp_ms,
            "batches": [
                {
                    "first_sequence": b.first_seq,
                    "last_sequence": b.last_seq,
                    "first_offset": b.first_offset,
                    "last_offset": b.last_offset,
                    "timestamp": b.timestamp_ms,
                }
                for b in entry.batches
            ],
        }
        for entry in state.producers.values()
    ]


def dump_leader_epochs(text: str, dump: Dump) -> None:
    try:
        entries = parse_checkpoint(text)
    except ValueError as exc:
        dump.problem(str(exc))
        return
    dump.body["entries"] = [{"epoch": e.epoch, "start_offset": e.start_offset} for e in entries]
    # The cache keeps its invariant by dropping entries: whatever it drops or changes
    # is an entry the checkpoint should not hold.
    loaded = LeaderEpochCache(entries).entries
    if loaded != entries:
        dump.problem(
            "epochs must increase and start offsets must not go down; a broker would load "
            + (", ".join(f"{e.epoch}@{e.start_offset}" for e in loaded) or "nothing")
        )


def dump_offset_checkpoint(text: str, dump: Dump) -> None:
    try:
        offsets = parse_offsets(text)
    except ValueError as exc:
        dump.problem(str(exc))
        return
    dump.body["entries"] = [
        {"topic": tp.topic, "partition": tp.partition, "offset": offset}
        for tp, offset in sorted(offsets.items())
    ]


# --- the command --------------------------------------------------------------------------


_KIND_ORDER = [SEGMENT, OFFSET_INDEX, TIME_INDEX, PRODUCER_SNAPSHOT, LEADER_EPOCHS]


def _directory_order(path: Path) -> tuple[str, int, str]:
    """A segment's files together, its log first, the checkpoints after the segments."""
    kind = file_kind(path)
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    stem = path.name.partition(".")[0]
    return ("~" if not stem.isdigit() else stem, rank, path.name)


def expand(paths: list[Path]) -> list[Path]:
    """Files as given; a directory stands for the files in it that this tool reads."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [p for p in path.iterdir() if p.is_file() and file_kind(p)]
            out.extend(sorted(found, key=_directory_order))
        else:
            out.append(path)
    return out


def dump_file(path: Path, *, deep: bool, print_data: bool) -> tuple[Dump, Iterator[dict[str, Any]]]:
    """The file's dump and an iterator over its segment batches (empty for other kinds);
    the batches are produced lazily so a text dump prints a large segment as it goes."""
    kind = file_kind(path)
    if kind is None:
        dump = Dump(path, UNREADABLE)
        if path.exists():
            dump.problem(f"not a file dump-log reads (expected {_KNOWN})")
        else:
            dump.problem("no such file")
        return dump, iter(())
    try:
        data = path.read_bytes()
    except OSError as exc:
        dump = Dump(path, UNREADABLE)
        dump.problem(f"cannot read it: {exc.strerror or exc}")
        return dump, iter(())
    dump = Dump(path, kind)
    if kind == SEGMENT:
        dump.body["base_offset"] = base_offset_of(path)
        return dump, segment_batches(data, dump, deep=deep, print_data=print_data)
    if kind == OFFSET_INDEX:
        dump_offset_index(path, data, dump)
    elif kind == TIME_INDEX:
        dump_time_index(path, data, dump)
    elif kind == PRODUCER_SNAPSHOT:
        dump_producer_snapshot(data, dump)
    else:
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            dump.problem(f"not a text checkpoint: {exc}")
            return dump, iter(())
        if kind == LEADER_EPOCHS:
            dump_leader_epochs(text, dump)
        else:
            dump_offset_checkpoint(text, dump)
    return dump, iter(())


def text_lines(dump: Dump) -> Iterator[str]:
    """The non-segment part of a dump as Kafka-style `key: value` lines."""
    body = dump.body
    if dump.kind == OFFSET_INDEX:
        for e in body.get("entries", []):
            yield f"offset: {e['offset']} position: {e['position']}"
    elif dump.kind == TIME_INDEX:
        for e in body.get("entries", []):
            yield f"timestamp: {e['timestamp']} offset: {e['offset']}"
    elif dump.kind == PRODUCER_SNAPSHOT and "producers" in body:
        yield f"mapEndOffset: {body['map_end_offset']}"
        for p in body["producers"]:
            yield (
                f"producerId: {p['producer_id']} producerEpoch: {p['producer_epoch']} "
                f"lastTimestamp: {p['last_timestamp']} batches: {len(p['batches'])}"
            )
            for b in p["batches"]:
                yield (
                    f"| firstSequence: {b['first_sequence']} lastSequence: {b['last_sequence']} "
                    f"firstOffset: {b['first_offset']} lastOffset: {b['last_offset']} "
                    f"timestamp: {b['timestamp']}"
                )
    elif dump.kind == LEADER_EPOCHS:
        for e in body.get("entries", []):
            yield f"epoch: {e['epoch']} startOffset: {e['start_offset']}"
    elif dump.kind == OFFSET_CHECKPOINT:
        for e in body.get("entries", []):
            yield f"topic: {e['topic']} partition: {e['partition']} offset: {e['offset']}"


def problem_line(problem: dict[str, Any]) -> str:
    return f"CORRUPT: {problem['error']}"


def dump_log(
    files: list[Path] = typer.Argument(  # noqa: B008 - typer's idiom
        None, help="Segment, index, time index, snapshot or checkpoint files, or directories"
    ),
    files_option: str | None = typer.Option(
        None, "--files", help="Comma-separated files, as kafka-dump-log.sh takes them"
    ),
    deep_iteration: bool = typer.Option(
        False, "--deep-iteration", help="Decode every record, not only batch headers"
    ),
    print_data_log: bool = typer.Option(
        False, "--print-data-log", help="Print keys and values too (implies --deep-iteration)"
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file, per line"),
) -> None:
    """Print what segments, indexes, snapshots and checkpoints hold (kafka-dump-log.sh).

    Exits 1 if any file is corrupt or unreadable.
    """
    err_console = tool_console(stderr=True, soft_wrap=True)  # whole lines, for grep
    files = list(files or []) + [Path(f) for f in (files_option or "").split(",") if f]
    if not files:
        err_console.print(
            "[bold red]error:[/] give --files FILE[,FILE] (or the files as arguments)"
        )
        raise typer.Exit(code=2)
    deep = deep_iteration or print_data_log
    damaged: list[Dump] = []
    for path in expand(files):
        dump, batches = dump_file(path, deep=deep, print_data=print_data_log)
        if as_json:
            if dump.kind == SEGMENT:
                dump.body["batches"] = list(batches)
            typer.echo(json.dumps(dump.to_json()))
        else:
            _print_text(dump, batches)
        if dump.problems:
            damaged.append(dump)
    for dump in damaged:
        # The full list is in the dump itself; this is the summary an operator scans.
        for problem in dump.problems[:_ERRORS_SHOWN_PER_FILE]:
            err_console.print(
                f"[bold red]error:[/] {escape(str(dump.path))}: {escape(problem['error'])}"
            )
        hidden = len(dump.problems) - _ERRORS_SHOWN_PER_FILE
        if hidden > 0:
            err_console.print(f"[bold red]error:[/] {escape(str(dump.path))}: {hidden} more")
    if damaged:
        count = sum(len(d.problems) for d in damaged)
        if count > 1:  # one problem's own line says it all
            err_console.print(f"[bold red]{count} problem(s) in {len(damaged)} file(s)[/]")
        raise typer.Exit(code=1)


def _print_text(dump: Dump, batches: Iterator[dict[str, Any]]) -> None:
    if dump.kind == UNREADABLE:
        return  # nothing to show but the error, which goes to stderr
    # Kafka's heading; the files kafka-dump-log.sh does not read say what we took them for.
    if dump.kind in (SEGMENT, OFFSET_INDEX, TIME_INDEX, PRODUCER_SNAPSHOT):
        typer.echo(f"Dumping {dump.path}")
    else:
        typer.echo(f"Dumping {dump.path} ({dump.kind})")
    if dump.kind == SEGMENT and "base_offset" in dump.body:
        typer.echo(f"Log starting offset: {dump.body['base_offset']}")
    reported = 0
    for batch in batches:
        typer.echo(batch_line(batch))
        if "records" in batch and batch["records"] is None:
            typer.echo("| records not decoded: the batch's CRC does not match")
        for record in batch.get("records") or ():
            typer.echo(record_line(record, batch["timestamp_type"]))
        # What reading this batch found wrong prints right after it, in context.
        for problem in dump.problems[reported:]:
            typer.echo(problem_line(problem))
        reported = len(dump.problems)
    for line in text_lines(dump):
        typer.echo(line)
    for problem in dump.problems[reported:]:
        typer.echo(problem_line(problem))
