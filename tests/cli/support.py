"""Running a `strandline` command in-process, as the tool tests do."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from typer.testing import CliRunner

from strandline.cli.main import app

runner = CliRunner()


def tool(*command: str) -> tuple[Callable[..., Any], Callable[..., str], Callable[..., str]]:
    """(run, ok, fails) for one command: `ok` returns stdout of a call that must exit 0,
    `fails` the single error line of one that must exit 1 without a crash."""

    def run(*args: str) -> Any:
        # Wide columns, so rich never wraps a table cell a test parses.
        result = runner.invoke(app, [*command, *args], env={"COLUMNS": "250", "NO_COLOR": "1"})
        # An exit (0 or 1) is the tool's answer; any other exception is a crash.
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            crash = "".join(traceback.format_exception(result.exception))
            raise AssertionError(f"{args} crashed instead of reporting an error:\n{crash}")
        return result

    def ok(*args: str) -> str:
        result = run(*args)
        assert result.exit_code == 0, f"{args}: {result.output}"
        return str(result.stdout)

    def fails(*args: str) -> str:
        result = run(*args)
        assert result.exit_code == 1, f"{args} exited {result.exit_code}: {result.output}"
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: "), lines[0]
        return lines[0]

    return run, ok, fails
