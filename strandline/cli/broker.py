"""`strandline broker --config server.properties`."""

from pathlib import Path

import typer


def run_broker(
    config: Path = typer.Option(..., "--config", help="server.properties file"),
) -> None:
    """Run one broker process in the foreground."""
    from strandline.server.broker import main as broker_main
    from strandline.server.config import ConfigError

    try:
        broker_main(config)
    except ConfigError as e:
        # A setting the broker cannot serve (an unknown listener scheme, TLS without
        # a keystore, a bad SASL setting): one clear line, no traceback, exit 1.
        typer.echo(f"error: {config}: {e}", err=True)
        raise typer.Exit(1) from None
