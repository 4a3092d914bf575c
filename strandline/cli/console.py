"""`strandline console`: serve the web console (strandline/console/, docs/console.md).

Every source is checked before the port opens, so a typo'd --bootstrap-server or
--zookeeper is one line and exit code 1 rather than a console full of empty pages.
"""

from __future__ import annotations

import socket
from pathlib import Path

import typer
import uvicorn
from rich.markup import escape

from strandline.cli import tool_console
from strandline.client.admin import AdminError, read_properties
from strandline.console.app import create_app
from strandline.console.gather import Gatherer
from strandline.console.sources import ConsoleError, parse_metrics_urls, resolve

err_console = tool_console(stderr=True)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


def _listen(host: str, port: int) -> socket.socket:
    """Bind here rather than in uvicorn, whose bind failure is a log line and sys.exit."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        raise ConsoleError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def console(
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", help="host:port[,host:port] of any broker"
    ),
    zookeeper: str | None = typer.Option(
        None,
        "--zookeeper",
        help="host:port or host:port/chroot: controller, epochs, ISR znodes, reassignments",
    ),
    data_dir: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--data-dir",
        help="A `strandline cluster` data dir: cluster.json, metrics URLs, state-change logs",
    ),
    metrics_url: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--metrics-url", help="BROKER_ID=URL of a broker's /metrics (repeatable)"
    ),
    command_config: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--command-config",
        help="Client properties file (TLS/SASL settings, as for every tool; docs/security.md)",
    ),
    port: int = typer.Option(8080, "--port", help="Port to serve on (0: any free one)"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on"),
) -> None:
    """A web console: brokers, topics, live replica logs, groups, reassignments, timeline."""
    gatherer: Gatherer | None = None
    try:
        sources = resolve(bootstrap_server, zookeeper, data_dir, parse_metrics_urls(metrics_url))
        try:
            sources.client_config.update(read_properties(command_config))
        except AdminError as exc:
            raise ConsoleError(str(exc)) from exc
        gatherer = Gatherer(sources).start()
        sock = _listen(host, port)
    except ConsoleError as exc:
        if gatherer is not None:
            gatherer.close()
        raise _fail(str(exc)) from exc
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    # Flushed at once: a script (or a test) waits for this line to learn the port.
    print(f"Strandline console on http://{shown}:{bound_port}/ ({sources.bootstrap})", flush=True)
    gatherer.sample_in_background()
    server = uvicorn.Server(
        uvicorn.Config(create_app(gatherer), log_level="warning", lifespan="off")
    )
    try:
        server.run(sockets=[sock])
    finally:
        gatherer.close()
        sock.close()
