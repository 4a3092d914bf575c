"""`strandline dump-log` against files the storage layer itself wrote.

One partition directory is built through `Log` (five codecs, an idempotent producer's
batch, a transaction marker appended as a follower in a new leader epoch, one more
batch), then closed so it leaves its indexes, a producer snapshot and its
leader-epoch checkpoint. The dump must give back what was written.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from typer.testing import CliRunner

from strandline.cli.main import app
from strandline.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    assign_offsets,
)
from strandline.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    write_offsets,
)
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.types import TopicPartition
from tests.storage.batches import build_batch

TP = TopicPartition("orders", 3)
CODEC_ORDER = ["none", "gzip", "snappy", "lz4", "zstd"]
PRODUCER_ID, PRODUCER_EPOCH = 7, 2
ODD_VALUE = b"line1\nbin\xff\\"  # a newline, a byte that is not UTF-8, a backslash
SEGMENT = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TIMEINDEX = "00000000000000000000.timeindex"

runner = CliRunner()


@dataclass(frozen=True)
class Written:
    """What the fixture appended, batch by batch: (codec, keys, values, timestamps)."""

    dir: Path
    batches: list[tuple[str, list[bytes], list[bytes], list[int]]]
    producer_batch: int  # index in `batches` of the idempotent producer's batch
    control_offset: int  # offset of the COMMIT marker
    after_marker: int  # offset of the batch appended after it, in leader epoch 1
    log_end_offset: int


def control_batch(producer_id: int, producer_epoch: int, timestamp: int) -> bytearray:
    """A COMMIT marker as a transaction coordinator has the leader write it."""
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, producer_epoch, -1, 1 << 30)
    builder.append(0, timestamp, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), [])
    buf = bytearray(builder.build())
    # kafka-python never builds control batches (only brokers do): set the bit ourselves.
    attributes = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)[0] | CONTROL_MASK
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return buf


@pytest.fixture
def written(tmp_path: Path) -> Written:
    directory = tmp_path / TP.dir_name
    # index.interval.bytes=0: every batch after the first gets an index entry.
    log = Log.open(
        directory,
        TP,
        LogConfig(index_interval_bytes=0),
        recovery_point=0,
        log_start_offset=0,
        now_ms=0,
        clean_shutdown=False,
    )
    batches = []
    for i, codec in enumerate(CODEC_ORDER):
        # Repetitive values, so every codec really compresses (kafka-python keeps a batch
        # uncompressed when compression does not pay).
        values = [b"v%d-%d-" % (i, j) * 30 for j in range(3)]
        keys = [b"k%d" % j for j in range(3)]
        stamps = [1_000 + 10 * i + j for j in range(3)]
        log.append_as_leader(build_batch(values, codec=codec, timestamps=stamps), 0, 0)
        batches.append((codec, keys, values, stamps))
    values = [b"p0", b"p1", ODD_VALUE]
    stamps = [2_000, 2_001, 2_002]
    log.append_as_leader(
        build_batch(
            values,
            timestamps=stamps,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            base_sequence=0,
        ),
        0,
        0,
    )
    batches.append(("none", [b"k0", b"k1", b"k2"], values, stamps))
    control_offset = log.log_end_offset
    marker = control_batch(PRODUCER_ID, PRODUCER_EPOCH, 3_000)
    assign_offsets(marker, control_offset, 1)
    log.append_as_follower(marker, 0)
    after = log.log_end_offset
    log.append_as_leader(build_batch([b"after"], timestamps=[4_000]), 1, 0)
    end = log.log_end_offset
    log.close()
    return Written(directory, batches, len(batches) - 1, control_offset, after, end)


def dump(*args: str | Path) -> Any:
    return runner.invoke(app, ["dump-log", *[str(a) for a in args]])


def dump_json(*args: str | Path) -> tuple[int, list[dict[str, Any]]]:
    result = dump(*args, "--json")
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines()]


def test_segment_batches_match_what_was_written(written: Written) -> None:
    code, [doc] = dump_json(written.dir / SEGMENT)
    assert code == 0, doc["problems"]
    assert doc["type"] == "segment" and doc["problems"] == []
    batches = doc["batches"]
    assert len(batches) == len(written.batches) + 2
    offset = 0
    for batch, (codec, _keys, values, stamps) in zip(batches, written.batches, strict=False):
        assert (batch["base_offset"], batch["last_offset"]) == (offset, offset + len(values) - 1)
        assert batch["count"] == len(values)
        assert batch["compression"] == codec
        assert (batch["base_timestamp"], batch["max_timestamp"]) == (stamps[0], stamps[-1])
        assert batch["crc_valid"] is True and batch["magic"] == 2
        assert batch["partition_leader_epoch"] == 0
        assert not batch["is_control"] and not batch["is_transactional"]
        offset += len(values)
    producer = batches[written.producer_batch]
    assert (producer["producer_id"], producer["producer_epoch"]) == (PRODUCER_ID, PRODUCER_EPOCH)
    assert (producer["base_sequence"], producer["last_sequence"]) == (0, 2)
    assert batches[0]["producer_id"] == -1 and batches[0]["last_sequence"] == -1
    marker, last = batches[-2], batches[-1]
    assert marker["base_offset"] == marker["last_offset"] == written.control_offset
    assert marker["is_control"] and marker["is_transactional"]
    assert marker["partition_leader_epoch"] == 1 and marker["producer_id"] == PRODUCER_ID
    assert last["base_offset"] == written.after_marker == written.log_end_offset - 1
    assert last["partition_leader_epoch"] == 1
    # Positions tile the file exactly: each batch starts where the one before ended.
    size = (written.dir / SEGMENT).stat().st_size
    assert batches[0]["position"] == 0
    for before, after in zip(batches, batches[1:], strict=False):
        assert after["position"] == before["position"] + before["size"]
    assert batches[-1]["position"] + batches[-1]["size"] == size


def test_deep_iteration_gives_every_record(written: Written) -> None:
    code, [doc] = dump_json(written.dir / SEGMENT, "--deep-iteration")
    assert code == 0
    records = [r for b in doc["batches"] for r in b["records"]]
    assert [r["offset"] for r in records] == list(range(written.log_end_offset))
    expected = [
        (stamp, len(key), len(value))
        for _codec, keys, values, stamps in written.batches
        for stamp, key, value in zip(stamps, keys, values, strict=True)
    ]
    got = [(r["timestamp"], r["key_size"], r["value_size"]) for r in records]
    assert got[: len(expected)] == expected
    assert all(r["headers"] == 1 for r in records[: len(expected)])
    producer_records = doc["batches"][written.producer_batch]["records"]
    assert [r["sequence"] for r in producer_records] == [0, 1, 2]
    marker = records[written.control_offset]
    assert marker["control_type"] == "COMMIT" and marker["headers"] == 0
    # Without --print-data-log the payloads stay out of the dump.
    assert "key" not in records[0] and "value" not in records[0]


def test_print_data_log_shows_keys_and_values_escaped(written: Written) -> None:
    result = dump(written.dir / SEGMENT, "--print-data-log")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # kafka-dump-log.sh's heading, batch and record lines, fields in its order.
    assert lines[:2] == [f"Dumping {written.dir / SEGMENT}", "Log starting offset: 0"]
    record_lines = {int(line.split()[2]): line for line in lines if line.startswith("| offset: ")}
    assert sorted(record_lines) == list(range(written.log_end_offset))
    offset = 0
    for _codec, keys, values, _stamps in written.batches:
        for key, value in zip(keys, values, strict=True):
            if value is not ODD_VALUE:
                assert f"key: {key.decode()} payload: {value.decode()}" in record_lines[offset]
            offset += 1
    # One line per record, whatever the bytes: a newline, a non-UTF-8 byte and a
    # backslash all come out escaped.
    odd = record_lines[offset - 1]
    assert odd.endswith("key: k2 payload: line1\\nbin\\xff\\\\"), odd
    assert "endTxnMarker: COMMIT" in record_lines[written.control_offset]
    batch_lines = [line for line in lines if line.startswith("baseOffset: ")]
    assert len(batch_lines) == len(written.batches) + 2
    assert "compresscodec: zstd" in batch_lines[4] and batch_lines[4].endswith("isvalid: true")
    assert "baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 2" in batch_lines[5]
    assert (
        "isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: "
    ) in batch_lines[6]
    fields = [word for word in batch_lines[0].split() if word.endswith(":")]
    assert fields == [
        "baseOffset:", "lastOffset:", "count:", "baseSequence:", "lastSequence:",
        "producerId:", "producerEpoch:", "partitionLeaderEpoch:", "isTransactional:",
        "isControl:", "deleteHorizonMs:", "position:", "CreateTime:", "size:", "magic:",
        "compresscodec:", "crc:", "isvalid:",
    ]  # fmt: skip
    first = record_lines[0].split()
    assert [w for w in first if w.endswith(":")][:7] == [
        "offset:", "CreateTime:", "keySize:", "valueSize:", "sequence:", "headerKeys:", "key:",
    ]  # fmt: skip
    assert "coordinatorEpoch: " in record_lines[written.control_offset]


def test_flipped_byte_is_reported_and_the_dump_goes_on(written: Written) -> None:
    _, [clean] = dump_json(written.dir / SEGMENT)
    second = clean["batches"][1]
    path = written.dir / SEGMENT
    data = bytearray(path.read_bytes())
    data[second["position"] + HEADER_SIZE + 5] ^= 0x40  # inside the (gzip) records
    path.write_bytes(bytes(data))

    result = dump(path, "--deep-iteration")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    batch_lines = [line for line in lines if line.startswith("baseOffset: ")]
    # Every batch is still listed: the damaged one's length is still known.
    assert len(batch_lines) == len(clean["batches"])
    assert "isvalid: false" in batch_lines[1]
    assert all("isvalid: true" in line for i, line in enumerate(batch_lines) if i != 1)
    corrupt = [line for line in lines if line.startswith("CORRUPT:")]
    assert len(corrupt) == 1
    assert f"CRC mismatch in the batch at position {second['position']}" in corrupt[0]
    assert f"stored {second['crc']}" in corrupt[0]
    assert f"at position {second['position']}" in result.stderr
    # The records after the damage are still decoded.
    assert f"| offset: {written.log_end_offset - 1} " in result.stdout

    code, [doc] = dump_json(path)
    assert code == 1
    assert [b["crc_valid"] for b in doc["batches"]].count(False) == 1
    assert [p["position"] for p in doc["problems"]] == [second["position"]]


def test_torn_tail_is_reported_where_it_starts(written: Written) -> None:
    path = written.dir / SEGMENT
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:40])  # a batch cut short, as a crash mid-write leaves
    code, [doc] = dump_json(path)
    assert code == 1
    assert len(doc["batches"]) == len(written.batches) + 2
    [problem] = doc["problems"]
    assert problem["position"] == len(whole)
    assert "torn batch" in problem["error"] and "40 bytes are not dumped" in problem["error"]


def test_indexes_are_monotone_and_point_at_their_batches(written: Written) -> None:
    _, [segment] = dump_json(written.dir / SEGMENT)
    batch_at = {b["position"]: b for b in segment["batches"]}
    code, [index, timeindex] = dump_json(written.dir / INDEX, written.dir / TIMEINDEX)
    assert code == 0, (index["problems"], timeindex["problems"])
    entries = index["entries"]
    # index.interval.bytes=0: one entry per batch after the first.
    assert len(entries) == len(segment["batches"]) - 1
    offsets = [e["offset"] for e in entries]
    positions = [e["position"] for e in entries]
    assert offsets == sorted(set(offsets)) and positions == sorted(set(positions))
    for entry in entries:
        assert batch_at[entry["position"]]["last_offset"] == entry["offset"]
    stamps = [e["timestamp"] for e in timeindex["entries"]]
    assert stamps == sorted(set(stamps))
    assert timeindex["entries"][-1] == {
        "timestamp": 4_000,
        "offset": written.log_end_offset - 1,
        "relative_offset": written.log_end_offset - 1,
    }
    text = dump(written.dir / INDEX).stdout
    assert f"offset: {entries[0]['offset']} position: {entries[0]['position']}" in text


def test_index_out_of_order_is_reported_by_entry(written: Written) -> None:
    path = written.dir / INDEX
    raw = path.read_bytes()
    entry = 8  # (relative offset u32, position u32)
    swapped = raw[entry : 2 * entry] + raw[:entry] + raw[2 * entry :]
    path.write_bytes(swapped + b"\x00\x01")  # and a torn last entry
    code, [doc] = dump_json(path)
    assert code == 1
    errors = {(p["entry"], p["error"].split(" (")[0]) for p in doc["problems"]}
    assert (1, "entry 1 is not increasing") in errors
    assert (1, "entry 1 position is not increasing") in errors
    assert any("2 bytes after the last whole entry" in p["error"] for p in doc["problems"])
    # Swapped entries still point at batches ending at their offsets: no mismatch.
    assert not any("ends at offset" in p["error"] for p in doc["problems"])


def test_index_entry_pointing_at_the_wrong_batch(written: Written) -> None:
    path = written.dir / INDEX
    raw = bytearray(path.read_bytes())
    first_position = struct.unpack_from(">I", raw, 4)[0]
    struct.pack_into(">I", raw, 0, struct.unpack_from(">I", raw, 0)[0] - 1)
    path.write_bytes(bytes(raw))
    code, [doc] = dump_json(path)
    assert code == 1
    [problem] = doc["problems"]
    assert problem["entry"] == 0
    assert f"is at position {first_position}" in problem["error"]


def test_leader_epoch_checkpoint(written: Written) -> None:
    path = written.dir / LEADER_EPOCH_CHECKPOINT
    code, [doc] = dump_json(path)
    assert code == 0
    assert doc["entries"] == [
        {"epoch": 0, "start_offset": 0},
        {"epoch": 1, "start_offset": written.control_offset},
    ]
    text = dump(path).stdout.splitlines()
    assert text[1:] == [
        "epoch: 0 startOffset: 0",
        f"epoch: 1 startOffset: {written.control_offset}",
    ]

    path.write_text("0\n2\n3 10\n2 20\n")  # epochs going down
    code, [doc] = dump_json(path)
    assert code == 1
    assert [e["epoch"] for e in doc["entries"]] == [3, 2]
    assert "epochs must increase" in doc["problems"][0]["error"]
    path.write_text("0\n3\n0 0\n")
    result = dump(path)
    assert result.exit_code == 1 and "expected 3 entries, found 1" in result.stderr


def test_producer_snapshot(written: Written) -> None:
    [snapshot] = written.dir.glob("*.snapshot")
    assert snapshot.name == f"{written.log_end_offset:020d}.snapshot"
    code, [doc] = dump_json(snapshot)
    assert code == 0
    assert doc["map_end_offset"] == written.log_end_offset
    [producer] = doc["producers"]
    first = sum(len(b[2]) for b in written.batches[: written.producer_batch])
    assert producer["producer_id"] == PRODUCER_ID
    assert producer["producer_epoch"] == PRODUCER_EPOCH
    assert producer["batches"] == [
        {
            "first_sequence": 0,
            "last_sequence": 2,
            "first_offset": first,
            "last_offset": first + 2,
            "timestamp": 2_002,
        }
    ]
    snapshot.write_bytes(snapshot.read_bytes()[:-3])
    result = dump(snapshot)
    assert result.exit_code == 1 and "CRC mismatch" in result.stderr


def test_offset_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    write_offsets(path, {TP: 42, TopicPartition("clicks", 0): 7})
    code, [doc] = dump_json(path)
    assert code == 0
    assert doc["entries"] == [
        {"topic": "clicks", "partition": 0, "offset": 7},
        {"topic": "orders", "partition": 3, "offset": 42},
    ]
    assert "topic: orders partition: 3 offset: 42" in dump(path).stdout


def test_a_directory_dumps_every_file_and_bad_names_fail(written: Written) -> None:
    code, docs = dump_json(written.dir)
    assert code == 0
    assert [d["type"] for d in docs] == [
        "segment",
        "offset-index",
        "time-index",
        "producer-snapshot",
        "leader-epoch-checkpoint",
    ]
    stray = written.dir / "state-change.log"
    stray.write_text("{}\n")
    result = dump(stray, written.dir / "missing.log")
    assert result.exit_code == 1
    assert "not a file dump-log reads" in result.stderr
    assert "no such file" in result.stderr
    assert result.stdout == ""
