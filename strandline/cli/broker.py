"""`strandline broker --config server.properties`."""

from pathlib import Path

import typer


def run_broker(
    config: Path = typer.Option(..., "--config", help="server.properties file"),
) -> None:
    """Run one broker process in the foreground."""
    from strandline.server.broker import main as broker_main

    broker_main(config)
