"""`strandline broker --config server.properties`."""

from pathlib import Path

import typer


def run_broker(
    config: Path = typer.Option(..., "--config", help="server.properties file"),
) -> None:
    """Run one broker process in the foreground."""
    from strandline.server.broker import run

    code = run(config)
    if code:
        raise typer.Exit(code)
