"""The run timeline PNG: written, valid, one legend entry per fault kind."""

from __future__ import annotations

import struct
from pathlib import Path

from strandline.chaos.history import Op
from strandline.chaos.timeline import draw_timeline, fault_colours, per_second

from .test_checker import fault

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _send(t: float, type: str, seq: int) -> Op:
    op: Op = {
        "t": t,
        "process": "p0",
        "f": "send",
        "type": type,
        "topic": "t",
        "partition": 0,
        "key": "k",
        "value": f"v{seq}",
        "producer": "p0",
        "seq": seq,
        "idempotent": True,
        "acks": "all",
    }
    if type == "ok":
        op["offset"] = seq
    return op


def _history() -> list[Op]:
    ops: list[Op] = []
    seq = 0
    for tenth in range(300):
        t = tenth / 10
        down = 8 <= t < 11 or 18 <= t < 21
        ops.append(_send(t, "info" if down and tenth % 2 else ("fail" if down else "ok"), seq))
        seq += 1
    ops += [fault(8.0, "kill", "start", 1), fault(11.0, "kill", "end", 1)]
    ops += [fault(18.0, "partition", "start", 2), fault(21.0, "partition", "end", 2)]
    ops += [fault(25.0, "kill", "start", 3), fault(26.0, "kill", "end", 3)]
    return ops


def test_the_timeline_png_names_every_fault_kind(tmp_path: Path) -> None:
    path = tmp_path / "timeline.png"
    timeline = draw_timeline(_history(), path, "seed 1: kill, partition")
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 200
    assert timeline.fault_kinds == ["kill", "partition"]
    assert "fault: kill" in timeline.legend_labels
    assert "fault: partition" in timeline.legend_labels
    # One legend entry per kind, however many windows it had.
    assert timeline.legend_labels.count("fault: kill") == 1
    assert "acked/s" in timeline.legend_labels
    assert timeline.seconds == 30


def test_per_second_bins_split_acked_from_failed() -> None:
    acked, failed = per_second(_history())
    assert acked[0] == 10 and failed[0] == 0
    assert acked[9] == 0 and failed[9] == 10
    assert sum(acked) + sum(failed) == 300


def test_fault_kinds_get_distinct_colours() -> None:
    colours = fault_colours(["kill", "partition", "weird", "stranger", "kill"])
    assert len(colours) == 4 and len(set(colours.values())) == 4


def test_an_empty_history_still_draws(tmp_path: Path) -> None:
    timeline = draw_timeline([], tmp_path / "empty.png", "nothing")
    assert (tmp_path / "empty.png").read_bytes()[:8] == PNG_SIGNATURE
    assert timeline.fault_kinds == [] and timeline.seconds == 1
