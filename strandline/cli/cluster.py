"""`strandline cluster up|down|status|kill|start|partition|zk-kill|zk-start|expire-session`:
a local ZooKeeper (or 3-server ensemble) + N-broker cluster, and network faults on it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.faults.partition import describe
from strandline.launcher.local_cluster import ClusterError, LocalCluster, host_layout, parse_signal

app = typer.Typer(help="Run a local ZooKeeper + N-broker cluster.", no_args_is_help=True)
console = tool_console()
err_console = tool_console(stderr=True)

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
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
    return typer.Exit(code=1)


@app.command("up")
def up(
    data_dir: Path = DATA_DIR,
    brokers: int | None = typer.Option(
        None, "--brokers", min=1, help="Number of brokers (default 1, or hosts x per host)"
    ),
    hosts: int | None = typer.Option(
        None, "--hosts", min=1, help="Shape the brokers as this many hosts (broker.rack = host)"
    ),
    brokers_per_host: int | None = typer.Option(
        None, "--brokers-per-host", min=1, help="Broker processes per host (with --hosts)"
    ),
    config: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--config", help="Broker setting key=value (repeatable), e.g. min.insync.replicas=2"
    ),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", help="Use this ZooKeeper (host:port/chroot) instead of starting one"
    ),
    zookeeper_nodes: int = typer.Option(
        1, "--zookeeper-nodes", help="ZooKeeper servers to start: 1 (standalone) or 3"
    ),
    netns: bool = typer.Option(
        False, "--netns", help="One network namespace per node, so partitions can be injected"
    ),
    disk_limit_mb: int | None = typer.Option(
        None,
        "--disk-limit-mb",
        min=8,
        help="Put each broker's log dir on a tmpfs of this size (for `cluster fill-disk`)",
    ),
    security: str = typer.Option(
        "plaintext",
        "--security",
        help="plaintext, ssl, sasl_plaintext or sasl_ssl: TLS and/or SASL on the listener, "
        "ACLs on, an admin super user in DIR/client.properties",
    ),
    metrics_port_base: int | None = typer.Option(
        None,
        "--metrics-port-base",
        min=1,
        help="Broker i serves Prometheus metrics on this port + i - 1 (default: the ports "
        "this directory's last cluster had, else free ones); DIR/prometheus/ gets "
        "prometheus.yml, targets.json and alerts.yml",
    ),
) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap servers."""
    if zookeeper_nodes not in (1, 3):
        raise _fail(ValueError(f"--zookeeper-nodes must be 1 or 3, not {zookeeper_nodes}"))
    try:
        layout = host_layout(brokers, hosts, brokers_per_host)
        cluster = LocalCluster(data_dir).up(
            brokers or len(layout) or 1,
            parse_overrides(config),
            zk_connect=zookeeper,
            zookeeper_nodes=zookeeper_nodes,
            netns=netns,
            disk_limit_mb=disk_limit_mb,
            security=security,
            hosts=hosts,
            brokers_per_host=brokers_per_host,
            metrics_port_base=metrics_port_base,
        )
    except (ClusterError, OSError, RuntimeError, ValueError) as exc:
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
    if cluster.zookeepers:
        zookeepers = Table(title="ZooKeeper servers")
        for column in ("id", "address", "mode", "netns", "pid"):
            zookeepers.add_column(column)
        for server_id in cluster.zk_servers():
            node = cluster.zookeepers[server_id]
            mode = cluster.zk_mode(server_id)
            colour = "red" if mode == "down" else "bold green" if mode == "leader" else "green"
            zookeepers.add_row(
                str(server_id),
                f"{node.host}:{node.port}",
                f"[{colour}]{mode}[/]",
                node.netns or "",
                str(node.pid or ""),
            )
        console.print(zookeepers)
    brokers = Table(title="Brokers")
    for column in ("id", "address", "state", "broker epoch", "host", "netns", "pid"):
        brokers.add_column(column)
    for broker_id, broker in sorted(cluster.brokers.items()):
        live = broker_id in state.live_brokers
        brokers.add_row(
            str(broker_id),
            state.live_brokers.get(broker_id, f"{broker.host}:{broker.port}"),
            "[green]live[/]" if live else "[red]down[/]",
            str(state.broker_epochs.get(broker_id, "")),
            broker.host_name or "",
            broker.netns or "",
            str(broker.pid or ""),
        )
    for broker_id in sorted(set(state.live_brokers) - set(cluster.brokers)):
        brokers.add_row(
            str(broker_id), state.live_brokers[broker_id], "[green]live[/]", "", "", "", ""
        )
    console.print(brokers)
    if cluster.netns_enabled:
        active = "; ".join(describe(f) for f in cluster.faults) or "none"
        console.print(f"network faults: [bold]{active}[/]")
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


@app.command("kill-host")
def kill_host(
    host: str = typer.Argument(..., help="Host name, e.g. host2 (clusters started with --hosts)"),
    data_dir: Path = DATA_DIR,
) -> None:
    """SIGKILL every broker on one host at once, as when the machine loses power."""
    try:
        victims = LocalCluster.load(data_dir).kill_host(host)
    except ClusterError as exc:
        raise _fail(exc) from exc
    console.print(f"killed brokers {', '.join(map(str, victims))} on {host}")


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
    host, port = cluster.broker_address(broker)
    console.print(f"broker {broker} started on {host}:{port}")


def _parse_groups(text: str) -> list[list[str]]:
    groups = [[n.strip() for n in group.split(",") if n.strip()] for group in text.split("/")]
    # One group is fine: everything it doesn't name forms the other side.
    if any(not g for g in groups):
        raise ValueError(
            f"--groups wants node lists separated by '/', e.g. 1,2/3,zk1; got {text!r}"
        )
    return groups


def _parse_one_way(text: str) -> tuple[str, str]:
    src, sep, dst = text.partition(":")
    if not sep or not src.strip() or not dst.strip():
        raise ValueError(f"--one-way wants SRC:DST, e.g. 1:2; got {text!r}")
    return src.strip(), dst.strip()


@app.command("partition")
def partition(
    data_dir: Path = DATA_DIR,
    groups: str | None = typer.Option(
        None,
        "--groups",
        help="Node groups that can't reach each other, e.g. 1,2/3,zk1 (unnamed nodes: one "
        "more group)",
    ),
    isolate: str | None = typer.Option(None, "--isolate", help="Cut one node from every node"),
    one_way: str | None = typer.Option(None, "--one-way", help="SRC:DST, drop SRC -> DST"),
    from_zookeeper: int | None = typer.Option(
        None, "--from-zookeeper", help="Cut this broker from every ZooKeeper server"
    ),
    heal: bool = typer.Option(False, "--heal", help="Remove every network fault"),
) -> None:
    """Add a network fault (faults accumulate) or heal them all. Needs `up --netns`."""
    chosen = [
        name
        for name, value in (
            ("--groups", groups),
            ("--isolate", isolate),
            ("--one-way", one_way),
            ("--from-zookeeper", from_zookeeper),
            ("--heal", heal or None),
        )
        if value is not None
    ]
    try:
        if len(chosen) != 1:
            raise ValueError(
                "give exactly one of --groups, --isolate, --one-way, --from-zookeeper, --heal"
                + (f" (got {', '.join(chosen)})" if chosen else "")
            )
        cluster = LocalCluster.load(data_dir)
        if groups is not None:
            cluster.partition(_parse_groups(groups))
        elif isolate is not None:
            cluster.isolate(isolate.strip())
        elif one_way is not None:
            cluster.one_way(*_parse_one_way(one_way))
        elif from_zookeeper is not None:
            cluster.from_zookeeper(from_zookeeper)
        else:
            cluster.heal()
    except (ClusterError, ValueError) as exc:
        raise _fail(exc) from exc
    active = "; ".join(describe(f) for f in cluster.faults) or "none"
    console.print(f"network faults now: {active}")


@app.command("zk-kill")
def zk_kill(
    server: int = typer.Argument(..., help="ZooKeeper server id (1..3)"),
    data_dir: Path = DATA_DIR,
) -> None:
    """SIGKILL one ZooKeeper server (its data stays for zk-start)."""
    try:
        LocalCluster.load(data_dir).zk_kill(server)
    except ClusterError as exc:
        raise _fail(exc) from exc
    console.print(f"killed ZooKeeper server {server}")


@app.command("zk-start")
def zk_start(
    server: int = typer.Argument(..., help="ZooKeeper server id (1..3)"),
    data_dir: Path = DATA_DIR,
) -> None:
    """Restart one ZooKeeper server on its data dir; waits until it serves."""
    try:
        cluster = LocalCluster.load(data_dir)
        cluster.zk_start(server)
        mode = cluster.zk_mode(server)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from exc
    console.print(f"ZooKeeper server {server} started ({mode})")


@app.command("expire-session")
def expire_session(
    broker: int = typer.Argument(..., help="Broker id"),
    data_dir: Path = DATA_DIR,
) -> None:
    """Make one broker's ZooKeeper session expire (netns: cut it from ZooKeeper; otherwise
    SIGSTOP it) for its session timeout plus a margin, then let it reconnect."""
    try:
        expired = LocalCluster.load(data_dir).expire_session(broker)
    except ClusterError as exc:
        raise _fail(exc) from exc
    if expired:
        console.print(f"broker {broker}'s ZooKeeper session expired; it is reconnecting")
    else:
        console.print(f"[yellow]broker {broker} was held away, but ZooKeeper still listed it[/]")


@app.command("fill-disk")
def fill_disk(
    broker: int = typer.Argument(..., help="Broker id"),
    data_dir: Path = DATA_DIR,
) -> None:
    """Fill one broker's log dir (a tmpfs from `up --disk-limit-mb`) until it is full."""
    try:
        written = LocalCluster.load(data_dir).fill_disk(broker)
    except (ClusterError, RuntimeError) as exc:
        raise _fail(exc) from exc
    console.print(f"broker {broker}'s log dir is full ({written / 2**20:.1f} MiB of filler)")


@app.command("free-disk")
def free_disk(
    broker: int = typer.Argument(..., help="Broker id"),
    data_dir: Path = DATA_DIR,
) -> None:
    """Give back the space `fill-disk` took; the broker takes writes again."""
    try:
        LocalCluster.load(data_dir).free_disk(broker)
    except (ClusterError, RuntimeError) as exc:
        raise _fail(exc) from exc
    console.print(f"broker {broker}'s log dir has space again")


@app.command("rolling-restart")
def rolling_restart(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="A `cluster up` data dir: restart its brokers"
    ),
    zookeeper: str | None = typer.Option(
        None,
        "--zookeeper",
        help="Brokers on hosts: the ensemble and chroot of their zookeeper.connect",
    ),
    restart_command: str | None = typer.Option(
        None,
        "--restart-command",
        help="Shell command restarting one broker; {id}, {host}, {port} are filled in, e.g. "
        "'ssh {host} systemctl restart strandline-broker@{id}'",
    ),
    brokers: str | None = typer.Option(
        None, "--brokers", help="Comma-separated ids in order (default: all, controller last)"
    ),
    min_insync_replicas: int | None = typer.Option(
        None,
        "--min-insync-replicas",
        min=1,
        help="The brokers' static min.insync.replicas (default: from broker 1's "
        "server.properties with --data-dir, else 1); topic and dynamic overrides are read "
        "from ZooKeeper",
    ),
    timeout: float = typer.Option(
        120.0, "--timeout", help="Seconds to wait for each broker to come back"
    ),
) -> None:
    """Restart brokers one at a time: controlled shutdown, wait until the broker is back,
    in every ISR and leading its preferred partitions, then the next. Refuses a broker
    whose stop would leave a partition under min.insync.replicas."""
    from strandline.cli.rolling_restart import (
        CommandRestarter,
        LocalRestarter,
        Restarter,
        Roller,
        RollError,
        broker_order,
    )
    from strandline.client.admin import AdminSettings

    try:
        if (data_dir is None) == (zookeeper is None):
            raise ValueError("give either --data-dir (a local cluster) or --zookeeper (hosts)")
        restarter: Restarter
        settings = AdminSettings("strandline-rolling-restart")
        if data_dir is not None:
            cluster = LocalCluster.load(data_dir)
            if cluster.zk_connect is None:
                raise ClusterError(f"the cluster in {data_dir} has no ZooKeeper connect string")
            zk_connect = cluster.zk_connect
            restarter = LocalRestarter(cluster)
            if cluster.client_config:
                settings = AdminSettings.from_properties(
                    cluster.client_config, "strandline-rolling-restart"
                )
            if min_insync_replicas is None and cluster.brokers:
                static = _read_setting(cluster.config_path(min(cluster.brokers)), MIN_ISR)
                min_insync_replicas = int(static) if static else None
        else:
            assert zookeeper is not None
            zk_connect = zookeeper
        if restart_command is not None:
            restarter = CommandRestarter(restart_command, timeout)
        elif data_dir is None:
            raise ValueError("--zookeeper needs --restart-command (how to restart one broker)")
        roller = Roller(
            zk_connect,
            restarter,
            min_insync_replicas or 1,
            settings,
            timeout_s=timeout,
            say=console.print,
        )
        state, _ = roller.status()
        order = (
            [int(b) for b in brokers.split(",") if b.strip()]
            if brokers
            else broker_order(state.live_brokers, state.controller)
        )
        if not order:
            raise ClusterError("no live brokers registered in ZooKeeper")
        rolls = roller.roll(order)
    except (ClusterError, RollError, OSError, ValueError) as exc:
        raise _fail(exc) from exc
    summary = ", ".join(f"{r.broker_id}: {r.back_s:.1f}s" for r in rolls)
    console.print(f"rolled {len(rolls)} brokers ({summary})")


MIN_ISR = "min.insync.replicas"


def _read_setting(path: Path, key: str) -> str | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, sep, value = line.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None
