"""`strandline service start|stop|restart|status --config server.properties`: run one
broker in the background on a host without systemd (or under any other supervisor-less
setup), as `kafka-server-start.sh -daemon` / `kafka-server-stop.sh` do.

The pid goes to `<strandline.logs.dir>/broker.pid`, the process's output to
`<strandline.logs.dir>/broker.out`. `start` returns once the broker answers Metadata on
its advertised listener listing itself; `stop` sends SIGTERM (the broker's controlled
shutdown moves its leaderships away first) and waits for the process to exit. `restart`
is what `cluster rolling-restart --restart-command` runs on each host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from strandline.launcher.local_cluster import answers_metadata, tail
from strandline.server.config import BrokerConfig, ConfigError

app = typer.Typer(help="Run one broker in the background from its server.properties.")

CONFIG = typer.Option(..., "--config", help="The broker's server.properties")
TIMEOUT = typer.Option(60.0, "--timeout", help="Seconds to wait for start-up or shutdown")


class ServiceError(RuntimeError):
    pass


def _load(config: Path) -> BrokerConfig:
    try:
        return BrokerConfig.from_file(config)
    except (OSError, ConfigError) as exc:
        raise ServiceError(f"{config}: {exc}") from exc


def pid_file(cfg: BrokerConfig) -> Path:
    return cfg.logs_dir / "broker.pid"


def running_pid(config: Path, cfg: BrokerConfig) -> int | None:
    """The pid in the pid file if that process still runs this config (pids get reused)."""
    try:
        pid = int(pid_file(cfg).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError):
        return None
    return pid if str(config.resolve()) in cmdline else None


def start_broker(config: Path, timeout_s: float) -> int:
    cfg = _load(config)
    if (pid := running_pid(config, cfg)) is not None:
        raise ServiceError(f"broker {cfg.broker_id} already runs (pid {pid})")
    cfg.logs_dir.mkdir(parents=True, exist_ok=True)
    out_path = cfg.logs_dir / "broker.out"
    with open(out_path, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "strandline", "broker", "--config", str(config.resolve())],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives this command and the shell that ran it
        )
    pid_file(cfg).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServiceError(
                f"broker {cfg.broker_id} exited during start-up ({process.returncode}); "
                f"tail of {out_path}:\n{tail(out_path)}"
            )
        try:
            response = answers_metadata(cfg.advertised_host, cfg.advertised_port, timeout=2.0)
            if cfg.broker_id in {int(b.node_id) for b in response.brokers}:  # type: ignore[attr-defined]
                return process.pid
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    # Half-started is the worst state to leave a host in: stop it, say why.
    stop_broker(config, timeout_s=10.0)
    raise ServiceError(
        f"broker {cfg.broker_id} did not answer Metadata on "
        f"{cfg.advertised_host}:{cfg.advertised_port} within {timeout_s:g}s, so it was "
        f"stopped again; tail of {out_path}:\n{tail(out_path)}"
    )


def stop_broker(config: Path, timeout_s: float) -> int | None:
    """SIGTERM and wait; SIGKILL if it has not exited within `timeout_s`. Returns the pid
    stopped, None if none ran."""
    cfg = _load(config)
    pid = running_pid(config, cfg)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    while _alive(pid):
        time.sleep(0.05)
    pid_file(cfg).unlink(missing_ok=True)
    return pid


def _alive(pid: int) -> bool:
    try:
        # Our child only when `start` ran in this process; reap it so it stops existing.
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


@app.command("start")
def start(config: Path = CONFIG, timeout: float = TIMEOUT) -> None:
    """Start the broker in the background; return once it serves."""
    try:
        pid = start_broker(config, timeout)
    except ServiceError as exc:
        raise _fail(exc) from exc
    typer.echo(f"broker {_load(config).broker_id} started (pid {pid})")


@app.command("stop")
def stop(config: Path = CONFIG, timeout: float = TIMEOUT) -> None:
    """Controlled shutdown (SIGTERM), waiting until the process has exited."""
    try:
        pid = stop_broker(config, timeout)
        broker_id = _load(config).broker_id
    except ServiceError as exc:
        raise _fail(exc) from exc
    typer.echo(f"broker {broker_id} " + ("was not running" if pid is None else "stopped"))


@app.command("restart")
def restart(config: Path = CONFIG, timeout: float = TIMEOUT) -> None:
    """stop, then start."""
    try:
        stop_broker(config, timeout)
        pid = start_broker(config, timeout)
    except ServiceError as exc:
        raise _fail(exc) from exc
    typer.echo(f"broker {_load(config).broker_id} restarted (pid {pid})")


@app.command("status")
def status(config: Path = CONFIG) -> None:
    """Exit 0 and print the pid if the broker runs, exit 3 (as LSB status) if not."""
    try:
        cfg = _load(config)
    except ServiceError as exc:
        raise _fail(exc) from exc
    pid = running_pid(config, cfg)
    if pid is None:
        typer.echo(f"broker {cfg.broker_id} is not running")
        raise typer.Exit(3)
    typer.echo(f"broker {cfg.broker_id} is running (pid {pid})")
