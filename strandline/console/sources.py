"""Where the console finds the cluster: the command line, or a `strandline cluster` data dir.

With a data dir, cluster.json names the bootstrap servers, the ZooKeeper connect string
(chroot included) and each broker's metrics URL, and the broker directories hold the
state-change logs; explicit options win over what the file says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLUSTER_FILE = "cluster.json"


class ConsoleError(RuntimeError):
    """Reported to the user as one line (exit code 1), or as an error page."""


class NotFoundError(ConsoleError):
    """A topic, partition or group the cluster does not have: a 404 page."""


class BadRequestError(ConsoleError):
    """A form field that makes no sense (an offset that is not a number): a 400 page."""


@dataclass(frozen=True)
class Sources:
    bootstrap: str
    zookeeper: str | None = None
    data_dir: Path | None = None
    metrics_urls: dict[int, str] = field(default_factory=dict)
    # Broker ids cluster.json lists: a broker missing from ZooKeeper is "down", not unknown.
    known_brokers: tuple[int, ...] = ()
    # The admin client's settings (strandline.client.admin): cluster.json's
    # client_config, then --command-config's keys.
    client_config: dict[str, str] = field(default_factory=dict)


def parse_metrics_urls(values: list[str]) -> dict[int, str]:
    """`--metrics-url ID=URL` pairs."""
    urls: dict[int, str] = {}
    for value in values:
        broker, sep, url = value.partition("=")
        if not sep or not broker.strip().isdigit() or not url.strip():
            raise ConsoleError(f"--metrics-url expects BROKER_ID=URL, got {value!r}")
        urls[int(broker)] = url.strip()
    return urls


def _read_cluster_file(data_dir: Path) -> dict[str, Any]:
    path = data_dir / CLUSTER_FILE
    if not data_dir.is_dir():
        raise ConsoleError(f"--data-dir {data_dir} is not a directory")
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConsoleError(f"no cluster in {data_dir} ({CLUSTER_FILE} not found)") from exc
    except (OSError, ValueError) as exc:
        raise ConsoleError(f"cannot read {path}: {exc}") from exc
    if not isinstance(state, dict):
        raise ConsoleError(f"{path} is not a cluster.json (expected a JSON object)")
    return state


def resolve(
    bootstrap: str | None,
    zookeeper: str | None,
    data_dir: Path | None,
    metrics_urls: dict[int, str] | None = None,
) -> Sources:
    """The cluster's coordinates; raises ConsoleError saying what is missing."""
    urls: dict[int, str] = {}
    known: tuple[int, ...] = ()
    client_config: dict[str, str] = {}
    if data_dir is not None:
        data_dir = data_dir.resolve()
        state = _read_cluster_file(data_dir)
        brokers = state.get("brokers") or {}
        known = tuple(sorted(int(b) for b in brokers))
        urls = {
            int(b): info["metrics_url"] for b, info in brokers.items() if info.get("metrics_url")
        }
        bootstrap = bootstrap or state.get("bootstrap_servers")
        zookeeper = zookeeper or state.get("zookeeper_connect")
        # A `cluster up --security` cluster's own client settings (the super user);
        # --command-config, applied over them, wins.
        client_config = {str(k): str(v) for k, v in (state.get("client_config") or {}).items()}
    urls.update(metrics_urls or {})
    if not bootstrap:
        raise ConsoleError("give --bootstrap-server (or --data-dir of a `strandline cluster`)")
    return Sources(
        bootstrap=bootstrap,
        zookeeper=zookeeper,
        data_dir=data_dir,
        metrics_urls=urls,
        known_brokers=known,
        client_config=client_config,
    )
