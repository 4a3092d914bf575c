"""`strandline cluster up|down|status|kill|start`: a local ZooKeeper + N-broker cluster."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from strandline.cli.local_cluster import ClusterError, LocalCluster, parse_signal

app = typer.Typer(help="Run a local ZooKeeper + N-broker cluster.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

DATA_DIR = typer.Option(..., "--data-dir", help="Directory holding the cluster's files")


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--config")
        overrides[key.strip()] = value.strip()
    return overrides


def _fail(exc: Exception) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {exc}")
    return typer.Exit(code=1)


@app.command("up")
def up(
    data_dir: Path = DATA_DIR,
    brokers: int = typer.Option(1, "--brokers", min=1, help="Number of brokers"),
    config: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--config", help="Broker setting key=value (repeatable), e.g. min.insync.replicas=2"
    ),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", help="Use this ZooKeeper (host:port/chroot) instead of starting one"
    ),
) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap servers."""
    try:
        cluster = LocalCluster(data_dir).up(brokers, parse_overrides(config), zk_connect=zookeeper)
    except (ClusterError, OSError, RuntimeError) as exc:
        raise _fail(exc) from exc
    print(cluster.bootstrap)


@app.command("down")
def down(data_dir: Path = DATA_DIR) -> None:
    """Stop every broker (TERM, then KILL after a grace period) and then ZooKeeper."""
    try:
        LocalCluster.load(data_dir).stop()
    except ClusterError as exc:
        raise _fail(exc) from exc
    console.print(f"cluster in {data_dir} stopped")


@app.command("status")
def status(data_dir: Path = DATA_DIR) -> None:
    """Controller, live brokers and partition table, read from ZooKeeper."""
    try:
        cluster = LocalCluster.load(data_dir)
        state = cluster.status()
    except (ClusterError, OSError, RuntimeError) as exc:
        raise _fail(exc) from exc
    controller = "none" if state.controller is None else str(state.controller)
    console.print(
        f"bootstrap [bold]{cluster.bootstrap}[/]   zookeeper {cluster.zk_connect}   "
        f"controller [bold]{controller}[/] (epoch {state.controller_epoch})"
    )
    brokers = Table(title="Brokers")
    for column in ("id", "address", "state", "broker epoch", "pid"):
        brokers.add_column(column)
    for broker_id, broker in sorted(cluster.brokers.items()):
        live = broker_id in state.live_brokers
        brokers.add_row(
            str(broker_id),
            state.live_brokers.get(broker_id, f"127.0.0.1:{broker.port}"),
            "[green]live[/]" if live else "[red]down[/]",
            str(state.broker_epochs.get(broker_id, "")),
            str(broker.pid or ""),
        )
    for broker_id in sorted(set(state.live_brokers) - set(cluster.brokers)):
        brokers.add_row(str(broker_id), state.live_brokers[broker_id], "[green]live[/]", "", "")
    console.print(brokers)
    partitions = Table(title="Partitions")
    for column in ("topic", "partition", "leader", "epoch", "replicas", "isr", "marks"):
        partitions.add_column(column)
    for p in state.partitions:
        marks = []
        if p.offline:
            marks.append("[red]offline[/]")
        if p.under_replicated:
            marks.append("[yellow]under-replicated[/]")
        partitions.add_row(
            p.tp.topic,
            str(p.tp.partition),
            "none" if p.leader is None or p.leader < 0 else str(p.leader),
            "" if p.leader_epoch is None else str(p.leader_epoch),
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
            " ".join(marks),
        )
    console.print(partitions)


@app.command("kill")
def kill(
    broker: int = typer.Argument(..., help="Broker id"),
    data_dir: Path = DATA_DIR,
    signal_name: str = typer.Option("KILL", "--signal", help="KILL, TERM, STOP or CONT"),
) -> None:
    """Send a signal to one broker's process group."""
    try:
        sig = parse_signal(signal_name)
        cluster = LocalCluster.load(data_dir)
        if broker not in cluster.brokers:
            raise ClusterError(f"no broker {broker} in {data_dir}")
        cluster.kill(broker, sig)
    except (ClusterError, ValueError) as exc:
        raise _fail(exc) from exc
    console.print(f"sent SIG{sig.name.removeprefix('SIG')} to broker {broker}")


@app.command("start")
def start(
    broker: int = typer.Argument(..., help="Broker id"),
    data_dir: Path = DATA_DIR,
) -> None:
    """Restart one broker with its existing server.properties."""
    try:
        cluster = LocalCluster.load(data_dir)
        if broker not in cluster.brokers:
            raise ClusterError(f"no broker {broker} in {data_dir}")
        cluster.start(broker)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from exc
    console.print(f"broker {broker} started on 127.0.0.1:{cluster.brokers[broker].port}")
