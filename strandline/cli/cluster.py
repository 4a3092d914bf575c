"""`strandline cluster ...` (filled by the coordination work)."""

import typer

app = typer.Typer(help="Run a local ZooKeeper + N-broker cluster.", no_args_is_help=True)
