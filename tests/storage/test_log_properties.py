"""Property tests: random batch sequences round-trip; random tail damage recovers a prefix."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strandline.protocol.record_batch import iter_batches
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.types import TopicPartition

from .batches import CODECS, build_batch, decode

TP = TopicPartition("prop", 0)

batch_specs = st.lists(
    st.tuples(
        st.sampled_from(list(CODECS)),
        st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=25,
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def open_log(directory: Path, config: LogConfig, recovery_point: int = 0) -> Log:
    return Log.open(
        directory, TP, config, recovery_point=recovery_point, log_start_offset=0, now_ms=0
    )


def append_all(log: Log, specs: list[tuple[str, list[bytes]]]) -> list[bytes]:
    values: list[bytes] = []
    for codec, batch_values in specs:
        log.append_as_leader(build_batch(batch_values, codec=codec), 1, 0)
        values.extend(batch_values)
    return values


def read_values(log: Log, start: int = 0) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while offset < log.log_end_offset:
        got = log.read(offset, 700)
        out.extend((r[0], r[3]) for r in decode(got.records) if r[0] >= offset)
        offset = got.next_offset
    return out


@SETTINGS
@given(
    specs=batch_specs,
    segment_bytes=st.integers(300, 5_000),
    index_interval=st.integers(0, 1_000),
    probes=st.lists(st.integers(0, 10**6), max_size=5),
)
def test_random_batches_round_trip_and_survive_crash_recovery(
    specs: list[tuple[str, list[bytes]]],
    segment_bytes: int,
    index_interval: int,
    probes: list[int],
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp), config)
        values = append_all(log, specs)
        expected = list(enumerate(values))
        assert log.log_end_offset == len(values)
        assert read_values(log) == expected
        for probe in probes:
            offset = probe % len(values)
            got = log.read(offset, 1)
            assert got.first_offset <= offset < got.next_offset
        log.close()
        # No flush and no clean marker: every segment is CRC-checked again.
        again = open_log(Path(tmp), config)
        assert read_values(again) == expected
        again.close()


@SETTINGS
@given(specs=batch_specs, cut=st.floats(0, 1), flip=st.booleans())
def test_random_tail_damage_recovers_to_a_prefix(
    specs: list[tuple[str, list[bytes]]], cut: float, flip: bool
) -> None:
    config = LogConfig(index_interval_bytes=100)
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp), config)
        values = append_all(log, specs)
        data = log.read(0, 1 << 30).records
        log.close()
        boundaries = [0]
        counts = [0]
        for header in iter_batches(data):
            boundaries.append(header.position + header.size)
            counts.append(counts[-1] + header.record_count)
        damage_at = int(cut * (len(data) - 1))
        if flip:
            holder = max(b for b in boundaries if b <= damage_at)
            if 12 <= damage_at - holder < 16:
                damage_at = holder + 16  # partitionLeaderEpoch: outside the CRC, undetectable
        path = Path(tmp) / "00000000000000000000.log"
        if flip:
            damaged = bytearray(data)
            damaged[damage_at] ^= 0x5A
            path.write_bytes(damaged)
            # A flipped byte invalidates the batch holding it (length, magic or CRC).
            whole = max(i for i, b in enumerate(boundaries) if b <= damage_at)
        else:
            os.truncate(path, damage_at)
            whole = max(i for i, b in enumerate(boundaries) if b <= damage_at)
        again = open_log(Path(tmp), config)
        survivors = counts[whole]
        assert again.log_end_offset == survivors
        assert path.stat().st_size == boundaries[whole]
        assert read_values(again) == list(enumerate(values))[:survivors]
        # The recovered log takes new appends at the dense next offset.
        info = again.append_as_leader(build_batch([b"after"]), 2, 0)
        assert info.first_offset == survivors
        again.close()
