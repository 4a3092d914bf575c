"""SIGKILL a process in the middle of appending: every acknowledged record survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.types import TopicPartition

from .batches import decode

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from strandline.storage.config import LogConfig
    from strandline.storage.log import Log
    from strandline.types import TopicPartition

    log = Log.open(Path(sys.argv[1]), TopicPartition("crash", 0),
                   LogConfig(segment_bytes=20_000), recovery_point=0, log_start_offset=0,
                   now_ms=0)
    i = 0
    while True:
        builder = DefaultRecordBatchBuilder(2, i % 5, False, -1, -1, -1, 1 << 20)
        for j in range(4):
            builder.append(j, i, None, b"record-%d-%d" % (i, j) * 30, [])
        info = log.append_as_leader(bytes(builder.build()), 0, now_ms=i)
        print(info.last_offset, flush=True)  # the acknowledgement
        i += 1
    """
)


def test_sigkill_mid_append_keeps_acknowledged_records(tmp_path: Path) -> None:
    directory = tmp_path / "crash-0"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    acked = -1
    deadline = time.monotonic() + 30
    while acked < 2_000 and time.monotonic() < deadline:
        acked = int(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert acked >= 2_000
    log = Log.open(
        directory,
        TopicPartition("crash", 0),
        LogConfig(segment_bytes=20_000),
        recovery_point=0,
        log_start_offset=0,
        now_ms=0,
    )
    assert log.log_end_offset > acked
    assert log.log_end_offset % 4 == 0  # whole batches only
    offsets: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 16)
        offsets.extend(r[0] for r in decode(got.records))
        offset = got.next_offset
    assert offsets == list(range(log.log_end_offset))  # dense, nothing past the torn tail
