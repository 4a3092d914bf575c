"""The `strandline` command line."""

import os
import sys

from rich.console import Console

# A width no table reaches: rich's own default for a pipe.
_PIPE_WIDTH = 4096


def tool_console(stderr: bool = False, **options: object) -> Console:
    """A rich console for a tool's output. Piped output is read by scripts: rich would
    wrap it and cut table cells with "…" at 80 columns when the stream is not a
    terminal, so there it is as wide as a line gets (COLUMNS still wins)."""
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if "COLUMNS" not in os.environ and not stream.isatty():
        width = _PIPE_WIDTH
    return Console(stderr=stderr, width=width, **options)  # type: ignore[arg-type]
