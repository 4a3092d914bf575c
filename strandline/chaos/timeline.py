"""A run's picture: acknowledged and failed writes per second, with the fault windows shaded.

Draws on a bare matplotlib Figure with the Agg canvas rather than pyplot: no global
figure registry, so concurrent schedules cannot leak or cross figures. Writes one PNG.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from strandline.chaos.checker import FaultWindow, fault_windows
from strandline.chaos.history import Op

# Stable colours for the kinds the nemesis knows, so pictures of different runs compare;
# other kinds take the leftover colours in order of appearance.
KNOWN_COLOURS: dict[str, str] = {
    "kill": "#d62728",
    "pause": "#ff7f0e",
    "partition": "#9467bd",
    "zk-isolate": "#8c564b",
    "zk-kill": "#e377c2",
    "disk-full": "#7f7f7f",
    "session-expiry": "#bcbd22",
    "one-way": "#17becf",
    "zk-blip": "#393b79",
    "clock": "#1f77b4",
}
SPARE_COLOURS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2")
ACKED_COLOUR = "#2ca02c"
FAILED_COLOUR = "#000000"


@dataclass(frozen=True)
class Timeline:
    path: Path
    legend_labels: list[str]
    fault_kinds: list[str]  # in order of first appearance
    seconds: int  # number of one-second bins


def fault_colours(kinds: Sequence[str]) -> dict[str, str]:
    colours: dict[str, str] = {}
    spare = 0
    for kind in kinds:
        if kind in colours:
            continue
        if kind in KNOWN_COLOURS:
            colours[kind] = KNOWN_COLOURS[kind]
        else:
            colours[kind] = SPARE_COLOURS[spare % len(SPARE_COLOURS)]
            spare += 1
    return colours


def per_second(ops: Iterable[Op]) -> tuple[list[int], list[int]]:
    """(ok sends, failed + indeterminate sends) per one-second bin, from t=0."""
    acked: list[int] = []
    failed: list[int] = []
    for op in ops:
        if op["f"] != "send" or op["type"] == "invoke":
            continue
        second = max(int(float(op["t"])), 0)
        if second >= len(acked):
            grow = second + 1 - len(acked)
            acked.extend([0] * grow)
            failed.extend([0] * grow)
        if op["type"] == "ok":
            acked[second] += 1
        else:
            failed[second] += 1
    return acked, failed


def draw_timeline(ops: Sequence[Op], png_path: str | Path, title: str) -> Timeline:
    horizon = max((float(op["t"]) for op in ops), default=0.0)
    acked, failed = per_second(ops)
    if not acked:  # nothing sent: draw one empty second rather than fail
        acked, failed = [0], [0]
    windows: list[FaultWindow] = fault_windows(ops, horizon=horizon)
    kinds = list(dict.fromkeys(w.kind for w in windows))
    colours = fault_colours(kinds)

    figure = Figure(figsize=(12, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    # Repeat the last bin so the step outline reaches the right edge of its second.
    edges = list(range(len(acked) + 1))
    acked_steps = acked + acked[-1:]
    failed_steps = failed + failed[-1:]
    axes.fill_between(edges, acked_steps, step="post", color=ACKED_COLOUR, alpha=0.3, linewidth=0)
    axes.step(edges, acked_steps, where="post", color=ACKED_COLOUR, linewidth=1.4, label="acked/s")
    axes.step(
        edges,
        failed_steps,
        where="post",
        color=FAILED_COLOUR,
        linewidth=1.0,
        linestyle="--",
        label="failed or indeterminate/s",
    )
    top = max(acked + failed, default=0)
    labelled: set[str] = set()
    for window in windows:
        end = window.end if window.end > window.start else window.start + 0.2
        axes.axvspan(
            window.start,
            end,
            color=colours[window.kind],
            alpha=0.25,
            linewidth=0,
            label=None if window.kind in labelled else f"fault: {window.kind}",
        )
        labelled.add(window.kind)
        axes.text(
            window.start,
            0.98,
            " " + window.kind + ("" if window.ended else " (no end)"),
            transform=axes.get_xaxis_transform(),
            fontsize=8,
            va="top",
            ha="left",
            color=colours[window.kind],
        )
    axes.set_xlim(0, max(horizon, len(acked), 1))
    axes.set_ylim(0, max(top, 1) * 1.2)  # headroom for the fault labels
    axes.set_xlabel("seconds since the run started")
    axes.set_ylabel("sends per second")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    legend = axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    labels = [text.get_text() for text in legend.get_texts()]

    path = Path(png_path)
    figure.savefig(path)
    return Timeline(path=path, legend_labels=labels, fault_kinds=kinds, seconds=len(acked))
