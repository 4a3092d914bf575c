"""`strandline sim ...` (filled by the replication-core work)."""

import typer

app = typer.Typer(help="Deterministic simulation of the replication protocol.", no_args_is_help=True)
