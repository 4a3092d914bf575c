"""A local cluster: one ZooKeeper (or a 3-server ensemble) and N broker processes under
one data directory, optionally each in its own network namespace.

Layout::

    DIR/cluster.json                 bootstrap servers, ZooKeeper connect string, pids, ports,
                                     the network (netns, ips) and the active network faults
    DIR/zookeeper/                   zoo.cfg, data/, zookeeper.out (unless an external one is used)
    DIR/zookeeper-<n>/               the same, per server, for a multi-server ensemble
    DIR/broker-<id>/server.properties
    DIR/broker-<id>/data/            log.dirs
    DIR/broker-<id>/logs/            strandline.logs.dir (state-change.log, ...)
    DIR/broker-<id>/broker.out       the process's stdout and stderr

Every process runs in its own process group (so signals reach its children too) and
keeps running after the launching command returns; cluster.json lets another process
(`strandline cluster down`) find and stop them. Broker ids are 1..N, ZooKeeper server
ids 1..Z.

With `netns=True` every broker and ZooKeeper server runs inside its own network
namespace (`strandline.faults.netns`) with its own IP, on fixed ports (9092, 2181): that
is what lets `partition`, `isolate`, `one_way` and `from_zookeeper` cut links between
nodes with nftables while clients in the root namespace still reach every node.

Host-shaped clusters (`hosts=H, brokers_per_host=M`) stand for H machines running M
broker processes each: brokers 1..M are on host1, M+1..2M on host2, and so on; every
broker's `broker.rack` is its host's name, so rack-aware assignment puts a partition's
replicas on different hosts. With netns a host is one namespace (one IP) and its
brokers listen on 9092, 9093, ...
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.handlers.threading import KazooTimeoutError
from kio.index import load_request_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from strandline.client.connection import KafkaConnection, send_request
from strandline.client.security import ClientSecurity
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zookeeper_server import (
    LOOPBACK,
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    free_port,
    kill_process_group,
    port_free,
    process_group_alive,
    server_mode,
)
from strandline.faults import disk
from strandline.faults import partition as faults
from strandline.faults.netns import MAX_HOSTS, ClusterNetwork, NetworkError, NetworkSpec
from strandline.launcher import prometheus_setup
from strandline.launcher.cluster_security import (
    ClusterSecurity,
    write_client_properties,
    write_private,
)
from strandline.types import PartitionInfo, TopicPartition

CLUSTER_FILE = "cluster.json"
CLIENT_PROPERTIES = "client.properties"
METADATA_API_KEY = 3
DEFAULT_SESSION_TIMEOUT_MS = 6000
# tickTime 200 ms: ephemeral znodes of a SIGKILLed broker vanish ~session timeout later.
ZK_TICK_MS = 200
ZK_MIN_SESSION_MS = 400
ZK_MAX_SESSION_MS = 30000
BROKER_COMMAND_ENV = "STRANDLINE_BROKER_COMMAND"
# Inside namespaces every node has its own IP, so the well-known ports never collide.
NETNS_BROKER_PORT = 9092
NETNS_METRICS_PORT = 9404  # the Prometheus JMX exporter's customary port
NETNS_ZK_PORT = 2181
ZK_QUORUM_PORT = 2888
ZK_ELECTION_PORT = 3888
# How long past the session timeout expire_session() keeps a broker cut off: ZooKeeper
# expires sessions on tick boundaries and the ensemble leader's expiry sweep takes a
# moment, so the timeout alone is not quite enough.
EXPIRY_MARGIN_S = 1.0
SIGNALS = {
    "KILL": signal.SIGKILL,
    "TERM": signal.SIGTERM,
    "STOP": signal.SIGSTOP,
    "CONT": signal.SIGCONT,
}


class ClusterError(RuntimeError):
    """A process did not start, or the data dir holds no (or another) cluster."""


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    pid: int | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ip: str | None = None  # its namespace's address; None: it listens on 127.0.0.1
    netns: str | None = None
    metrics_port: int | None = None  # None: metrics.port=0 was asked for (metrics off)
    host_name: str | None = None  # host-shaped clusters: the host it runs on (its rack)

    @property
    def host(self) -> str:
        return self.ip or LOOPBACK

    @property
    def metrics_url(self) -> str | None:
        if self.metrics_port is None:
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"


@dataclass
class ZooKeeperNode:
    """One embedded ZooKeeper server as cluster.json records it."""

    server_id: int
    port: int
    dir: Path
    ip: str | None = None
    netns: str | None = None
    quorum_port: int | None = None  # None: a standalone server
    election_port: int | None = None
    pid: int | None = None
    server: ZooKeeperServer | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return self.ip or LOOPBACK


@dataclass(frozen=True)
class ClusterStatus:
    controller: int | None
    controller_epoch: int | None
    live_brokers: dict[int, str]  # id -> host:port
    broker_epochs: dict[int, int]
    partitions: list[PartitionInfo]


def parse_signal(name: str | int | signal.Signals) -> signal.Signals:
    if isinstance(name, signal.Signals):
        return name
    if isinstance(name, int):
        return signal.Signals(name)
    key = name.upper().removeprefix("SIG")
    if key not in SIGNALS:
        raise ValueError(f"unsupported signal {name!r}; use one of {', '.join(SIGNALS)}")
    return SIGNALS[key]


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not readable)"


class LocalCluster:
    def __init__(
        self,
        data_dir: Path | str,
        broker_command: list[str] | None = None,
        startup_timeout_s: float = 60.0,
        stop_grace_s: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        env_command = os.environ.get(BROKER_COMMAND_ENV)
        self.broker_command = broker_command or (
            shlex.split(env_command) if env_command else [sys.executable, "-m", "strandline.server"]
        )
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.zk_connect: str | None = None
        # Embedded ZooKeeper servers by id (empty with an external zk_connect).
        self.zookeepers: dict[int, ZooKeeperNode] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        self.network: ClusterNetwork | None = None
        self.faults: list[faults.Fault] = []  # active network faults, in the order added
        # Size of the tmpfs each broker's log dir sits on (None: the data dir's own disk).
        self.disk_limit_mb: int | None = None
        # Brokers taken down on purpose by kill(); others found dead died unexpectedly.
        self._expected_down: set[int] = set()
        # `up --security`: what the brokers were given, and what a client needs.
        self.security: ClusterSecurity | None = None
        self.client_config: dict[str, str] = {}

    # --- layout ----------------------------------------------------------------------

    def broker_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}"

    def config_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "server.properties"

    def broker_out(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "broker.out"

    def zookeeper_dir(self, server_id: int) -> Path:
        # A single server keeps the historical DIR/zookeeper so old layouts still load.
        if len(self.zookeepers) <= 1 and server_id == 1:
            return self.data_dir / "zookeeper"
        return self.data_dir / f"zookeeper-{server_id}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for _, b in sorted(self.brokers.items()))

    @property
    def client_security(self) -> ClientSecurity | None:
        return ClientSecurity.from_config(self.client_config) if self.client_config else None

    def broker_address(self, broker_id: int) -> tuple[str, int]:
        broker = self.brokers[broker_id]
        return broker.host, broker.port

    # Server 1 under the names callers used before ensembles existed.
    @property
    def zookeeper(self) -> ZooKeeperServer | None:
        node = self.zookeepers.get(1)
        return node.server if node else None

    @property
    def zookeeper_pid(self) -> int | None:
        node = self.zookeepers.get(1)
        return node.pid if node else None

    @property
    def zookeeper_port(self) -> int | None:
        node = self.zookeepers.get(1)
        return node.port if node else None

    @property
    def netns_enabled(self) -> bool:
        return self.network is not None

    # --- start -----------------------------------------------------------------------

    def up(
        self,
        n_brokers: int,
        broker_overrides: dict[str, str] | None = None,
        zk_connect: str | None = None,
        *,
        zookeeper_nodes: int = 1,
        netns: bool = False,
        disk_limit_mb: int | None = None,
        security: str = "plaintext",
        hosts: int | None = None,
        brokers_per_host: int | None = None,
        metrics_port_base: int | None = None,
        alert_timing: prometheus_setup.AlertTiming | None = None,
    ) -> LocalCluster:
        """Start ZooKeeper (unless `zk_connect` names an external one, chroot included)
        and brokers 1..n; return once every broker answers Metadata listing itself.

        `zookeeper_nodes` > 1 starts an ensemble of that many servers. `netns` puts every
        broker and ZooKeeper server in its own network namespace (needs root, `ip`, `nft`).
        `disk_limit_mb` puts each broker's log dir on a tmpfs of that size, so that
        `fill_disk` can give one broker a really full disk (needs root).
        `security` (ssl, sasl_plaintext, sasl_ssl) secures the listener, turns the ACL
        authorizer on and creates an admin super user (`cluster_security.py`).
        `hosts` and `brokers_per_host` shape the brokers as hosts (see the module doc);
        `n_brokers` must then equal their product.
        Broker i serves metrics on `metrics_port_base + i - 1`, or else on the port it
        had in this directory's last cluster (when still free), so that dashboards and
        Prometheus' series keep their `instance`; DIR/prometheus/ gets a scrape config,
        file-based discovery of the endpoints and alert rules (`prometheus_setup.py`).
        """
        host_of = host_layout(n_brokers, hosts, brokers_per_host)
        if n_brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if zookeeper_nodes < 1:
            raise ValueError("an embedded ZooKeeper needs at least one server")
        if zk_connect is not None and (netns or zookeeper_nodes != 1):
            # An external ZooKeeper on loopback is unreachable from inside a namespace,
            # and its size is not ours to choose.
            raise ClusterError(
                "--zookeeper (external) can't be combined with --netns or --zookeeper-nodes"
            )
        existing = self.data_dir / CLUSTER_FILE
        if existing.exists() and self._any_recorded_process_alive():
            raise ClusterError(f"a cluster is already running from {self.data_dir}; stop it first")
        previous_metrics = _recorded_metrics_ports(existing)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            if netns:
                if host_of:
                    nodes = sorted(set(host_of.values()))
                else:
                    nodes = [str(b) for b in range(1, n_brokers + 1)]
                nodes += [f"zk{z}" for z in range(1, zookeeper_nodes + 1)]
                try:
                    self.network = ClusterNetwork.for_data_dir(self.data_dir, nodes)
                    self.network.setup()
                except (NetworkError, ValueError) as exc:
                    raise ClusterError(f"could not build the cluster network: {exc}") from exc
            if zk_connect is None:
                self._start_zookeepers(zookeeper_nodes)
            else:
                self.zk_connect = zk_connect
            for broker_id in range(1, n_brokers + 1):
                host_name = host_of.get(broker_id)
                if host_name is not None and self.network is not None:
                    # Brokers sharing a host share its IP: the k-th one takes port 9092+k.
                    slot = sum(1 for b, h in host_of.items() if h == host_name and b < broker_id)
                    spec = self.network.spec
                    broker = BrokerProcess(
                        broker_id,
                        NETNS_BROKER_PORT + slot,
                        ip=spec.ip(host_name),
                        netns=spec.netns(host_name),
                        metrics_port=NETNS_METRICS_PORT + slot,
                    )
                elif self.network is not None:
                    spec = self.network.spec
                    broker = BrokerProcess(
                        broker_id,
                        NETNS_BROKER_PORT,
                        ip=spec.ip(str(broker_id)),
                        netns=spec.netns(str(broker_id)),
                        metrics_port=NETNS_METRICS_PORT,
                    )
                else:
                    if metrics_port_base is not None:
                        metrics_port = metrics_port_base + broker_id - 1
                    else:
                        old = previous_metrics.get(broker_id)
                        metrics_port = old if old is not None and port_free(old) else free_port()
                    broker = BrokerProcess(broker_id, free_port(), metrics_port=metrics_port)
                broker.host_name = host_name
                if (broker_overrides or {}).get("metrics.port") in ("", "0"):
                    broker.metrics_port = None  # metrics asked off (the overhead bench)
                self.brokers[broker_id] = broker
            if security != "plaintext":
                assert self.zk_connect is not None
                self.security = ClusterSecurity.create(
                    security,
                    self.data_dir,
                    {b: p.host for b, p in self.brokers.items()},
                    self.zk_connect,
                )
                self.client_config = self.security.client_config()
                write_client_properties(self.data_dir / CLIENT_PROPERTIES, self.client_config)
            for broker_id, broker in self.brokers.items():
                self._write_server_properties(broker_id, broker.port, broker_overrides or {})
                if disk_limit_mb is not None:
                    disk.mount_limited(self.log_dir(broker_id), disk_limit_mb)
                    self.disk_limit_mb = disk_limit_mb
            for broker_id in self.brokers:
                self._spawn(broker_id)
            self._save()
            prometheus_setup.write(
                self.data_dir,
                {
                    b: f"{p.host}:{p.metrics_port}"
                    for b, p in self.brokers.items()
                    if p.metrics_port is not None
                },
                alert_timing or prometheus_setup.AlertTiming(),
            )
            for broker_id in self.brokers:
                self._wait_ready(broker_id)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_zookeepers(self, count: int) -> None:
        """Start `count` servers (a standalone one for 1) and wait until all serve."""
        for server_id in range(1, count + 1):
            node = ZooKeeperNode(server_id, port=0, dir=Path())
            self.zookeepers[server_id] = node
            if self.network is not None:
                node.ip = self.network.spec.ip(f"zk{server_id}")
                node.netns = self.network.spec.netns(f"zk{server_id}")
                node.port = NETNS_ZK_PORT
                if count > 1:
                    node.quorum_port, node.election_port = ZK_QUORUM_PORT, ZK_ELECTION_PORT
            elif count > 1:
                # Three JVMs on one loopback address: every port must differ.
                node.port, node.quorum_port, node.election_port = (
                    free_port(),
                    free_port(),
                    free_port(),
                )
        for server_id, node in self.zookeepers.items():
            node.dir = self.zookeeper_dir(server_id)
        if count == 1 and self.network is None:
            # Exactly the historical standalone server: free port picked (and retried) by
            # ZooKeeperServer itself.
            node = self.zookeepers[1]
            node.server = self._zookeeper_server(node).start()
            node.port, node.pid = node.server.port, node.server.pid
        else:
            for node in self.zookeepers.values():
                node.server = self._zookeeper_server(node).start(wait=False)
                node.pid = node.server.pid
            self._save()  # so `cluster down` finds the JVMs should the wait fail
            for node in self.zookeepers.values():
                assert node.server is not None
                node.server.wait_ready()
        self.zk_connect = ",".join(f"{n.host}:{n.port}" for n in self.zookeepers.values())

    def _zookeeper_server(self, node: ZooKeeperNode) -> ZooKeeperServer:
        ensemble = None
        if node.quorum_port is not None:
            ensemble = {
                n.server_id: (n.host, n.quorum_port or 0, n.election_port or 0)
                for n in self.zookeepers.values()
            }
        return ZooKeeperServer(
            node.dir,
            port=node.port or None,
            tick_time_ms=ZK_TICK_MS,
            min_session_timeout_ms=ZK_MIN_SESSION_MS,
            max_session_timeout_ms=ZK_MAX_SESSION_MS,
            host=node.host,
            server_id=node.server_id if ensemble else None,
            ensemble=ensemble,
            command_prefix=["ip", "netns", "exec", node.netns] if node.netns else None,
        )

    def start(self, broker_id: int) -> None:
        """(Re)start one broker with its existing server.properties; waits for Metadata."""
        broker = self.brokers[broker_id]
        if broker.pid is not None and process_group_alive(broker.pid):
            raise ClusterError(f"broker {broker_id} is already running (pid {broker.pid})")
        self._spawn(broker_id)
        self._expected_down.discard(broker_id)
        self._save()
        self._wait_ready(broker_id)

    def _write_server_properties(
        self, broker_id: int, port: int, overrides: dict[str, str]
    ) -> None:
        broker_dir = self.broker_dir(broker_id)
        (broker_dir / "data").mkdir(parents=True, exist_ok=True)
        (broker_dir / "logs").mkdir(parents=True, exist_ok=True)
        assert self.zk_connect is not None
        broker = self.brokers[broker_id]
        host = broker.host
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{host}:{port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(broker_dir / "data"),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": str(DEFAULT_SESSION_TIMEOUT_MS),
            "strandline.logs.dir": str(broker_dir / "logs"),
            "metrics.port": str(broker.metrics_port or 0),
        }
        if broker.host_name is not None:
            settings["broker.rack"] = broker.host_name
        if self.security is not None:
            settings.update(
                self.security.broker_settings(broker_id, host, port, sorted(self.brokers))
            )
        settings.update(overrides)
        lines = [f"# written by strandline cluster up for broker {broker_id}"]
        lines += [f"{key}={value}" for key, value in settings.items()]
        # The inter-broker password and sasl.plain.users are in it: owner-only.
        write_private(self.config_path(broker_id), "\n".join(lines) + "\n")

    def _spawn(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        with open(self.broker_out(broker_id), "ab") as out:
            out.write(
                f"--- starting broker {broker_id} at {time.strftime('%H:%M:%S')} ---\n".encode()
            )
            out.flush()
            # `ip netns exec` execs the broker in place: the pid is the broker's own.
            prefix = ["ip", "netns", "exec", broker.netns] if broker.netns else []
            process = subprocess.Popen(
                [*prefix, *self.broker_command, "--config", str(self.config_path(broker_id))],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.broker_dir(broker_id),
                start_new_session=True,  # own process group; survives the launcher
            )
        broker.process = process
        broker.pid = process.pid

    def _wait_ready(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        deadline = time.monotonic() + self.startup_timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.is_running(broker_id):
                raise ClusterError(
                    f"broker {broker_id} exited during start-up; tail of "
                    f"{self.broker_out(broker_id)}:\n{tail(self.broker_out(broker_id))}"
                )
            try:
                response = answers_metadata(
                    broker.host, broker.port, timeout=2.0, security=self.client_security
                )
                # Ready means registered: the broker lists itself (it may answer Metadata
                # with an empty broker list while it is still registering in ZooKeeper).
                listed = {int(b.node_id) for b in response.brokers}  # type: ignore[attr-defined]
                if broker_id in listed:
                    return
                last_error = ValueError(f"Metadata lists brokers {sorted(listed)}, not itself")
            except (OSError, ValueError, KeyError) as exc:
                last_error = exc
            time.sleep(0.05)
        raise ClusterError(
            f"broker {broker_id} did not answer Metadata on {broker.host}:{broker.port} within "
            f"{self.startup_timeout_s}s ({last_error!r}); tail of "
            f"{self.broker_out(broker_id)}:\n{tail(self.broker_out(broker_id))}"
        )

    def wait_for_full_metadata(self, timeout_s: float = 30.0) -> None:
        """Wait until every running broker's Metadata lists every running broker (the
        controller has sent UpdateMetadata everywhere); clients then see the whole cluster."""
        running = sorted(b for b in self.brokers if self.is_running(b))
        deadline = time.monotonic() + timeout_s
        pending = list(running)
        while pending:
            broker_id = pending[0]
            try:
                response = answers_metadata(
                    *self.broker_address(broker_id), timeout=2.0, security=self.client_security
                )
                listed = sorted(int(b.node_id) for b in response.brokers)  # type: ignore[attr-defined]
            except (OSError, ValueError, KeyError):
                listed = []
            if listed == running:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"broker {broker_id}'s Metadata lists brokers {listed}, expected {running}"
                )
            time.sleep(0.05)

    # --- signals and stop ------------------------------------------------------------

    def is_running(self, broker_id: int) -> bool:
        broker = self.brokers[broker_id]
        if broker.process is not None:
            return broker.process.poll() is None
        return broker.pid is not None and process_group_alive(broker.pid)

    def kill(self, broker_id: int, sig: str | int | signal.Signals = "KILL") -> None:
        """Send KILL, TERM, STOP or CONT to the broker's process group. KILL and TERM
        return once the process is gone (TERM escalates to KILL after the grace period)."""
        sig = parse_signal(sig)
        broker = self.brokers[broker_id]
        if broker.pid is None:
            raise ClusterError(f"broker {broker_id} has never been started")
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self._expected_down.add(broker_id)
            if sig == signal.SIGKILL:
                _signal_group(broker.pid, signal.SIGKILL)
                kill_process_group(broker.pid, grace_s=0)
            else:
                self._terminate(broker.pid)
            if broker.process is not None:
                broker.process.wait()
        else:
            _signal_group(broker.pid, sig)

    def hosts(self) -> dict[str, list[int]]:
        """Host name -> its broker ids (empty unless the cluster is host-shaped)."""
        by_host: dict[str, list[int]] = {}
        for broker_id, broker in sorted(self.brokers.items()):
            if broker.host_name is not None:
                by_host.setdefault(broker.host_name, []).append(broker_id)
        return by_host

    def kill_host(self, host_name: str) -> list[int]:
        """SIGKILL every broker on one host at the same moment (a machine losing power);
        returns their ids once all are gone."""
        victims = self.hosts().get(host_name)
        if not victims:
            known = ", ".join(self.hosts()) or "none (start with --hosts)"
            raise ClusterError(f"no host {host_name!r}; hosts: {known}")
        pids = [self.brokers[b].pid for b in victims if self.brokers[b].pid is not None]
        for pid in pids:
            assert pid is not None
            _signal_group(pid, signal.SIGKILL)
        for broker_id in victims:
            if self.brokers[broker_id].pid is not None:
                self.kill(broker_id, signal.SIGKILL)
        return victims

    def network_node(self, broker_id: int) -> str:
        """The network node a broker sits in: its host in a host-shaped cluster."""
        return self.brokers[broker_id].host_name or str(broker_id)

    def _terminate(self, pgid: int) -> None:
        _signal_group(pgid, signal.SIGTERM)
        _signal_group(pgid, signal.SIGCONT)  # a SIGSTOPped broker must see its TERM
        kill_process_group(pgid, grace_s=self.stop_grace_s)

    def stop(self) -> None:
        """TERM every broker (KILL after the grace period), then ZooKeeper. Nothing survives."""
        self._adopt_recorded_pids()
        alive = [
            b for b in self.brokers.values() if b.pid is not None and process_group_alive(b.pid)
        ]
        for broker in alive:
            assert broker.pid is not None
            self._expected_down.add(broker.broker_id)
            _signal_group(broker.pid, signal.SIGTERM)
            _signal_group(broker.pid, signal.SIGCONT)
        deadline = time.monotonic() + self.stop_grace_s
        for broker in alive:
            assert broker.pid is not None
            kill_process_group(broker.pid, grace_s=max(0.0, deadline - time.monotonic()))
            if broker.process is not None:
                broker.process.wait()
        for node in self.zookeepers.values():
            if node.server is not None:
                node.server.stop()
                node.server = None
            elif node.pid is not None:
                kill_process_group(node.pid, grace_s=5.0)
            node.pid = None
        # Only once nothing runs inside the namespaces: a namespace with a live process
        # would outlive `ip netns del`.
        if self.network is not None:
            self.network.teardown()
            self.faults = []
        if self.disk_limit_mb is not None:
            # The logs stay readable after `down` (verify-replicas --offline): the tmpfs
            # contents are copied back onto the data dir's own disk first.
            for broker_id in self.brokers:
                if disk.is_limited(self.log_dir(broker_id)):
                    disk.unmount(self.log_dir(broker_id), keep_contents=True)
        if (self.data_dir / CLUSTER_FILE).exists():
            self._save(stopped=True)

    def _adopt_recorded_pids(self) -> None:
        """Take over processes another LocalCluster on the same data dir (e.g. a
        `strandline cluster zk-start` or `start` command) started after us; otherwise
        stop() would miss them and leave them running."""
        if not (self.data_dir / CLUSTER_FILE).exists():
            return
        try:
            recorded = LocalCluster.load(self.data_dir)
        except (ClusterError, ValueError, KeyError):
            return
        for sid, other in recorded.zookeepers.items():
            node = self.zookeepers.get(sid)
            if node is not None and other.pid is not None and other.pid != node.pid:
                if node.server is not None and node.server.process is not None:
                    node.server.stop()
                node.server, node.pid = None, other.pid
        for bid, other_broker in recorded.brokers.items():
            broker = self.brokers.get(bid)
            if broker is not None and other_broker.pid is not None:
                if other_broker.pid != broker.pid and not self.is_running(bid):
                    broker.process, broker.pid = None, other_broker.pid

    def unexpected_deaths(self) -> dict[int, str]:
        """Brokers that exited without kill()/stop(): id -> tail of broker.out."""
        return {
            broker_id: tail(self.broker_out(broker_id))
            for broker_id, broker in self.brokers.items()
            if broker.pid is not None
            and broker_id not in self._expected_down
            and not self.is_running(broker_id)
        }

    # --- cluster.json ----------------------------------------------------------------

    def _save(self, stopped: bool = False) -> None:
        state: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "zookeeper_connect": self.zk_connect,
            # Server 1 in the pre-ensemble shape, for readers that only know this key.
            "zookeeper": {
                "pid": None if stopped else self.zookeeper_pid,
                "port": self.zookeeper_port,
                "embedded": self.zookeeper_port is not None,
            },
            "zookeepers": {
                str(sid): {
                    "pid": None if stopped else node.pid,
                    "ip": node.ip,
                    "port": node.port,
                    "netns": node.netns,
                    "dir": str(node.dir),
                    "quorum_port": node.quorum_port,
                    "election_port": node.election_port,
                }
                for sid, node in sorted(self.zookeepers.items())
            },
            "brokers": {
                str(broker_id): {
                    "pid": None if stopped else broker.pid,
                    "port": broker.port,
                    "ip": broker.ip,
                    "netns": broker.netns,
                    "metrics_port": broker.metrics_port,
                    "metrics_url": broker.metrics_url,
                    "host": broker.host_name,
                    "config": str(self.config_path(broker_id)),
                    "log": str(self.broker_out(broker_id)),
                }
                for broker_id, broker in sorted(self.brokers.items())
            },
            "netns": self.network is not None,
            "network": self.network.spec.to_json() if self.network is not None else None,
            "faults": self.faults,
            "broker_command": self.broker_command,
            "disk_limit_mb": self.disk_limit_mb,
            # What a client needs to connect (empty: PLAINTEXT); also in client.properties.
            "client_config": self.client_config,
        }
        path = self.data_dir / CLUSTER_FILE
        tmp = path.with_suffix(".json.tmp")
        # client_config holds the admin password: owner-only.
        write_private(tmp, json.dumps(state, indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, data_dir: Path | str) -> LocalCluster:
        """The cluster recorded in DIR/cluster.json (started by another process)."""
        path = Path(data_dir).resolve() / CLUSTER_FILE
        if not path.exists():
            raise ClusterError(f"no cluster in {path.parent} ({CLUSTER_FILE} not found)")
        state = json.loads(path.read_text())
        cluster = cls(path.parent, broker_command=state.get("broker_command"))
        cluster.zk_connect = state["zookeeper_connect"]
        if state.get("network"):
            cluster.network = ClusterNetwork(NetworkSpec.from_json(state["network"]))
        cluster.faults = list(state.get("faults") or [])
        cluster.disk_limit_mb = state.get("disk_limit_mb")
        cluster.client_config = dict(state.get("client_config") or {})
        zookeepers = state.get("zookeepers")
        if zookeepers is None and state.get("zookeeper", {}).get("port") is not None:
            # A file written before ensembles: one standalone server in DIR/zookeeper.
            old = state["zookeeper"]
            zookeepers = {
                "1": {
                    "pid": old.get("pid"),
                    "port": old["port"],
                    "dir": str(cluster.data_dir / "zookeeper"),
                }
            }
        for key, info in (zookeepers or {}).items():
            node = ZooKeeperNode(
                int(key),
                port=int(info["port"]),
                dir=Path(info["dir"]),
                ip=info.get("ip"),
                netns=info.get("netns"),
                quorum_port=info.get("quorum_port"),
                election_port=info.get("election_port"),
            )
            pid = info.get("pid")
            # The JVM's command line names its zoo.cfg, inside the server's own dir.
            if pid is not None and _is_our_process(pid, str(node.dir / "zoo.cfg")):
                node.pid = pid
            cluster.zookeepers[node.server_id] = node
        for key, info in state["brokers"].items():
            broker_id = int(key)
            pid = info.get("pid")
            # A recorded pid is only trusted while it still runs our config (pids get reused).
            if pid is not None and not _is_our_process(pid, str(cluster.config_path(broker_id))):
                pid = None
            cluster.brokers[broker_id] = BrokerProcess(
                broker_id,
                int(info["port"]),
                pid,
                ip=info.get("ip"),
                netns=info.get("netns"),
                metrics_port=info.get("metrics_port"),
                host_name=info.get("host"),
            )
        return cluster

    def _any_recorded_process_alive(self) -> bool:
        try:
            recorded = LocalCluster.load(self.data_dir)
        except (ClusterError, ValueError, KeyError):
            return False
        pids = [b.pid for b in recorded.brokers.values()]
        pids += [z.pid for z in recorded.zookeepers.values()]
        return any(pid is not None and process_group_alive(pid) for pid in pids)

    # --- status ----------------------------------------------------------------------

    def status(self, timeout_s: float = 10.0) -> ClusterStatus:
        """Read from ZooKeeper (any live ensemble member will do: the connect string
        lists them all)."""
        if self.zk_connect is None:
            raise ClusterError("cluster has no ZooKeeper connect string")
        try:
            with ZkClient(self.zk_connect, connect_timeout_s=timeout_s).connect() as zk:
                return read_cluster_status(zk)
        except KazooTimeoutError as exc:
            # A lost quorum is a state an operator rehearses on purpose: say so plainly.
            down = [str(n) for n in self.zk_servers() if self.zk_mode(n) == "down"]
            raise ClusterError(
                f"ZooKeeper ({self.zk_connect}) did not answer within {timeout_s:g}s"
                + (f"; servers down or out of quorum: {', '.join(down)}" if down else "")
            ) from exc

    # --- ZooKeeper servers -----------------------------------------------------------

    def zk_servers(self) -> list[int]:
        return sorted(self.zookeepers)

    def _zk_node(self, n: int) -> ZooKeeperNode:
        if n not in self.zookeepers:
            known = ", ".join(map(str, self.zk_servers())) or "none (external ZooKeeper)"
            raise ClusterError(f"no ZooKeeper server {n}; servers: {known}")
        return self.zookeepers[n]

    def zk_mode(self, n: int) -> str:
        """Its mode as `srvr` tells: leader, follower, standalone; "down" if it doesn't
        answer or has no quorum."""
        node = self._zk_node(n)
        return server_mode(node.host, node.port) or "down"

    def zk_leader(self) -> int | None:
        """The ensemble member whose `srvr` says Mode: leader (a standalone server counts
        as its own leader); None while there is none, e.g. during an election."""
        for n in self.zk_servers():
            if self.zk_mode(n) in ("leader", "standalone"):
                return n
        return None

    def zk_kill(self, n: int) -> None:
        """SIGKILL ZooKeeper server n (its data dir stays for zk_start)."""
        node = self._zk_node(n)
        if node.server is not None:
            node.server.kill()
        elif node.pid is not None:
            _signal_group(node.pid, signal.SIGKILL)
            kill_process_group(node.pid, grace_s=0)
        node.server, node.pid = None, None
        self._save()

    def zk_start(self, n: int) -> None:
        """Restart ZooKeeper server n on its old data dir; returns once `srvr` shows it
        serving (for an ensemble member: it rejoined a quorum)."""
        node = self._zk_node(n)
        if node.pid is not None and process_group_alive(node.pid):
            raise ClusterError(f"ZooKeeper server {n} is already running (pid {node.pid})")
        server = self._zookeeper_server(node)
        try:
            server.start()
        except ZooKeeperUnavailableError as exc:
            server.kill()
            raise ClusterError(str(exc)) from exc
        node.server, node.pid = server, server.pid
        self._save()

    # --- network faults --------------------------------------------------------------

    def _require_network(self, what: str) -> ClusterNetwork:
        if self.network is None:
            raise ClusterError(
                f"{what} needs a cluster started with --netns (netns=True): without network "
                f"namespaces every node shares 127.0.0.1 and no link can be cut"
            )
        return self.network

    def _set_faults(self, new_faults: list[faults.Fault], what: str) -> None:
        """Compute every namespace's ruleset for `new_faults` and load them all; the
        fault list is only recorded once the kernel has it."""
        network = self._require_network(what)
        spec = network.spec
        try:
            scripts = faults.rulesets(new_faults, spec.ips(), spec.bridge_ip)
            faults.apply_rulesets(scripts, {n: spec.netns(n) for n in spec.nodes})
        except (faults.FaultError, NetworkError) as exc:
            raise ClusterError(f"{what}: {exc}") from exc
        self.faults = new_faults
        self._save()

    def _add_fault(self, fault: faults.Fault) -> None:
        self._set_faults([*self.faults, fault], faults.describe(fault))

    def partition(self, groups: list[list[str]]) -> None:
        """Nodes in different groups can't talk; nodes named nowhere form one more group."""
        self._add_fault(faults.groups_fault([[str(n) for n in g] for g in groups]))

    def isolate(self, node: str) -> None:
        """`node` talks to no other node; clients (root namespace) still reach it."""
        self._add_fault(faults.isolate_fault(str(node)))

    def one_way(self, src: str, dst: str) -> None:
        """Packets from `src` to `dst` are dropped; `dst` -> `src` still flows."""
        self._add_fault(faults.one_way_fault(str(src), str(dst)))

    def from_zookeeper(self, broker_id: int) -> None:
        """The broker can't reach any ZooKeeper server, but reaches brokers and clients."""
        self._add_fault(faults.from_zookeeper_fault(self.network_node(broker_id)))

    def heal(self) -> None:
        """Remove every network fault."""
        self._set_faults([], "heal")

    def _node_rules(self, node: str, active: list[faults.Fault], what: str) -> None:
        """Load the rules `active` implies into `node`'s namespace only: one `nft -f`
        transaction (loading every node's ruleset, as `_set_faults` does, took seconds
        on a loaded machine). Not recorded in `faults`; `heal()` clears it too. The
        other namespaces are left as they are: for a node with no other fault in force."""
        network = self._require_network(what)
        spec = network.spec
        try:
            script = faults.rulesets(active, spec.ips(), spec.bridge_ip)[node]
            faults.apply_rulesets({node: script}, {node: spec.netns(node)})
        except (faults.FaultError, NetworkError) as exc:
            raise ClusterError(f"{what}: {exc}") from exc

    def blip_from_zookeeper(self, broker_id: int, cut: bool) -> None:
        """Cut (or restore) the broker's links to every ZooKeeper server, in the broker's
        own namespace (it drops both directions there), fast enough for a sub-second cut."""
        node = str(broker_id)
        self._node_rules(
            node,
            [faults.from_zookeeper_fault(node)] if cut else [],
            f"ZooKeeper blip of broker {broker_id}",
        )

    def cut_link_fast(self, broker_id: int, peer: int, cut: bool) -> None:
        """Cut (or restore) both directions between two brokers, in `broker_id`'s own
        namespace only; their ZooKeeper sessions are untouched."""
        node, other = str(broker_id), str(peer)
        self._node_rules(
            node,
            [faults.one_way_fault(node, other), faults.one_way_fault(other, node)] if cut else [],
            f"link {broker_id} <-> {peer}",
        )

    # --- disk faults -----------------------------------------------------------------

    def log_dir(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "data"

    def _limited_log_dir(self, broker_id: int) -> Path:
        if broker_id not in self.brokers:
            raise ClusterError(f"no broker {broker_id} in {self.data_dir}")
        directory = self.log_dir(broker_id)
        if self.disk_limit_mb is None or not disk.is_limited(directory):
            raise ClusterError(
                f"broker {broker_id}'s log dir is not on a size-limited filesystem; "
                "start the cluster with `cluster up --disk-limit-mb N`"
            )
        return directory

    def fill_disk(self, broker_id: int) -> int:
        """Fill broker `broker_id`'s log dir until ENOSPC; returns the bytes written."""
        return disk.fill(self._limited_log_dir(broker_id))

    def free_disk(self, broker_id: int) -> None:
        """Give back the space `fill_disk` took."""
        disk.free(self._limited_log_dir(broker_id))

    def expire_session(self, broker_id: int, timeout_s: float | None = None) -> bool:
        """Make the broker's ZooKeeper session really expire, then let it reconnect.

        With netns: cut the broker from ZooKeeper (only that cut is removed afterwards;
        other active faults stay). Without: SIGSTOP the broker, then SIGCONT — it cannot
        heartbeat while stopped. Either way the broker stays away for `timeout_s`
        (default: its zookeeper.session.timeout.ms plus a margin), and then until
        ZooKeeper has dropped its /brokers/ids registration (the visible sign of the
        expiry), at most twice as long. Returns whether that expiry was observed.
        """
        if broker_id not in self.brokers:
            raise ClusterError(f"no broker {broker_id} in {self.data_dir}")
        session_s = self._session_timeout_ms(broker_id) / 1000
        hold_s = session_s + EXPIRY_MARGIN_S if timeout_s is None else timeout_s
        fault = faults.from_zookeeper_fault(self.network_node(broker_id))
        added = False
        if self.network is not None:
            if fault not in self.faults:
                self._add_fault(fault)
                added = True
        else:
            broker = self.brokers[broker_id]
            if broker.pid is None:
                raise ClusterError(f"broker {broker_id} is not running")
            _signal_group(broker.pid, signal.SIGSTOP)
        expired = False
        try:
            started = time.monotonic()
            time.sleep(hold_s)
            deadline = started + 2 * hold_s
            while True:
                try:
                    expired = broker_id not in self.status(timeout_s=5.0).live_brokers
                except Exception:  # noqa: BLE001 - ZooKeeper busy electing: keep holding
                    expired = False
                if expired or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
        finally:
            if self.network is not None:
                if added:
                    remaining = list(self.faults)
                    remaining.remove(fault)
                    self._set_faults(remaining, "expire-session undo")
            else:
                broker = self.brokers[broker_id]
                if broker.pid is not None:
                    _signal_group(broker.pid, signal.SIGCONT)
        return expired

    def _session_timeout_ms(self, broker_id: int) -> int:
        try:
            for line in self.config_path(broker_id).read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() == "zookeeper.session.timeout.ms":
                    return int(value.strip())
        except (OSError, ValueError):
            pass
        return DEFAULT_SESSION_TIMEOUT_MS


def host_layout(
    n_brokers: int | None, hosts: int | None, brokers_per_host: int | None
) -> dict[int, str]:
    """Broker id -> host name ("host1", ...) for a host-shaped cluster, {} otherwise.
    `n_brokers`, when given, must equal hosts x brokers_per_host."""
    if hosts is None and brokers_per_host is None:
        return {}
    if hosts is None or brokers_per_host is None:
        raise ValueError("--hosts and --brokers-per-host go together")
    if not 1 <= hosts <= MAX_HOSTS:
        raise ValueError(f"--hosts must be 1..{MAX_HOSTS}, not {hosts}")
    if brokers_per_host < 1:
        raise ValueError(f"--brokers-per-host must be at least 1, not {brokers_per_host}")
    if n_brokers is not None and n_brokers != hosts * brokers_per_host:
        raise ValueError(
            f"--brokers {n_brokers} does not match --hosts {hosts} x --brokers-per-host "
            f"{brokers_per_host} = {hosts * brokers_per_host}; give the same number or "
            "leave --brokers out"
        )
    return {
        b: f"host{(b - 1) // brokers_per_host + 1}" for b in range(1, hosts * brokers_per_host + 1)
    }


def read_cluster_status(zk: ZkClient) -> ClusterStatus:
    live = zk.get_live_brokers()
    epoch = zk.get_controller_epoch()
    partitions: list[PartitionInfo] = []
    for topic in zk.get_all_topics():
        assignment = zk.get_topic_assignment(topic) or {}
        tps = [TopicPartition(topic, p) for p in sorted(assignment)]
        states = zk.get_partition_states(tps)
        for tp in tps:
            state = states.get(tp)
            partitions.append(
                PartitionInfo.of(
                    tp,
                    state[0].leader if state else None,
                    assignment[tp.partition],
                    state[0].isr if state else [],
                    live,
                    leader_epoch=state[0].leader_epoch if state else None,
                )
            )
    return ClusterStatus(
        controller=zk.get_controller(),
        controller_epoch=epoch[0] if epoch else None,
        live_brokers={b: f"{r.host}:{r.port}" for b, r in live.items()},
        broker_epochs={b: r.epoch for b, r in live.items()},
        partitions=partitions,
    )


def answers_metadata(
    host: str, port: int, timeout: float = 2.0, security: ClientSecurity | None = None
) -> object:
    """Ask ApiVersions v0 (every Kafka broker answers it), then send Metadata at the highest
    version both sides know; returns the Metadata response. With `security`, over TLS
    and/or after a SASL login, on one connection."""
    if security is not None:
        return asyncio.run(_answers_metadata_secured(host, port, timeout, security))
    versions = send_request(host, port, ApiVersionsRequest(), timeout=timeout)
    if versions.error_code != ErrorCode.none:
        raise ValueError(f"ApiVersions answered {versions.error_code!r}")
    supported = {k.api_key: k for k in versions.api_keys}
    if METADATA_API_KEY not in supported:
        raise ValueError("broker does not advertise Metadata")
    version = min(int(supported[METADATA_API_KEY].max_version), 12)
    request_type = load_request_schema(METADATA_API_KEY, version)
    kwargs: dict[str, object] = {"topics": None if version >= 1 else ()}
    field_names = set(request_type.__dataclass_fields__)
    if "allow_auto_topic_creation" in field_names:
        kwargs["allow_auto_topic_creation"] = False
    if "include_topic_authorized_operations" in field_names:
        kwargs["include_topic_authorized_operations"] = False
    if "include_cluster_authorized_operations" in field_names:
        kwargs["include_cluster_authorized_operations"] = False
    return send_request(host, port, request_type(**kwargs), timeout=timeout)


async def _answers_metadata_secured(
    host: str, port: int, timeout: float, security: ClientSecurity
) -> object:
    async with await KafkaConnection.open(host, port, timeout=timeout, security=security) as conn:
        request: Any = load_request_schema(METADATA_API_KEY, 12)(
            topics=None,  # type: ignore[call-arg]
            allow_auto_topic_creation=False,  # type: ignore[call-arg]
            include_topic_authorized_operations=False,  # type: ignore[call-arg]
        )
        return await conn.send(request, timeout=timeout)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _is_our_process(pid: int, marker: str) -> bool:
    """True if `pid` is alive and its command line mentions `marker` (our config path)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return marker in cmdline


def _recorded_metrics_ports(cluster_file: Path) -> dict[int, int]:
    """Broker id -> metrics port, as the cluster last started in this directory had them."""
    try:
        recorded = json.loads(cluster_file.read_text())
        return {
            int(b): int(info["metrics_port"])
            for b, info in recorded.get("brokers", {}).items()
            if info.get("metrics_port")
        }
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
