"""Kafka's command-line tools' plain-text output, shared by the tools that have a Kafka
twin: scripts written for kafka-*.sh parse these lines, so they are the default, and
`--output table|json` gives our rich table or a machine-readable document instead."""

from __future__ import annotations

from collections.abc import Sequence

OUTPUTS = ("kafka", "table", "json")
OUTPUT_HELP = "kafka (the Kafka tool's lines, the default), table or json"


def check_output(output: str) -> str | None:
    """The one-line error for a bad --output value, or None."""
    if output in OUTPUTS:
        return None
    return f"--output must be kafka, table or json, not {output!r}"


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """ToolsUtils.prettyPrintTable (kafka-transactions.sh): every cell left-aligned and
    padded to its column's widest cell, each followed by a tab, the last one too."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    return [
        "".join(f"{cell:<{width}}\t" for cell, width in zip(row, widths, strict=True))
        for row in (headers, *rows)
    ]


def left(value: object, width: int) -> str:
    """Java's %-Ns: left-aligned, padded to `width`, never cut."""
    return f"{value!s:<{width}}"
