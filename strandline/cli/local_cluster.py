"""A local cluster: one ZooKeeper and N broker processes under one data directory.

Layout::

    DIR/cluster.json                 bootstrap servers, ZooKeeper connect string, pids, ports
    DIR/zookeeper/                   zoo.cfg, data/, zookeeper.out (unless an external one is used)
    DIR/broker-<id>/server.properties
    DIR/broker-<id>/data/            log.dirs
    DIR/broker-<id>/logs/            strandline.logs.dir (state-change.log, ...)
    DIR/broker-<id>/broker.out       the process's stdout and stderr

Every process runs in its own process group (so signals reach its children too) and
keeps running after the launching command returns; cluster.json lets another process
(`strandline cluster down`) find and stop them. Broker ids are 1..N.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kio.index import load_request_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from strandline.client.connection import send_request
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zookeeper_server import (
    ZooKeeperServer,
    free_port,
    kill_process_group,
    process_group_alive,
)
from strandline.types import TopicPartition

CLUSTER_FILE = "cluster.json"
METADATA_API_KEY = 3
DEFAULT_SESSION_TIMEOUT_MS = 6000
# tickTime 200 ms: ephemeral znodes of a SIGKILLed broker vanish ~session timeout later.
ZK_TICK_MS = 200
ZK_MIN_SESSION_MS = 400
ZK_MAX_SESSION_MS = 30000
BROKER_COMMAND_ENV = "STRANDLINE_BROKER_COMMAND"
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


@dataclass(frozen=True)
class PartitionStatus:
    tp: TopicPartition
    leader: int | None
    leader_epoch: int | None
    replicas: list[int]
    isr: list[int]
    offline: bool
    under_replicated: bool


@dataclass(frozen=True)
class ClusterStatus:
    controller: int | None
    controller_epoch: int | None
    live_brokers: dict[int, str]  # id -> host:port
    broker_epochs: dict[int, int]
    partitions: list[PartitionStatus]


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
            shlex.split(env_command)
            if env_command
            else [sys.executable, "-m", "strandline", "broker"]
        )
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.zk_connect: str | None = None
        self.zookeeper: ZooKeeperServer | None = None
        self.zookeeper_pid: int | None = None
        self.zookeeper_port: int | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        # Brokers taken down on purpose by kill(); others found dead died unexpectedly.
        self._expected_down: set[int] = set()

    # --- layout ----------------------------------------------------------------------

    def broker_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}"

    def config_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "server.properties"

    def broker_out(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "broker.out"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for _, b in sorted(self.brokers.items()))

    def broker_address(self, broker_id: int) -> tuple[str, int]:
        return "127.0.0.1", self.brokers[broker_id].port

    # --- start -----------------------------------------------------------------------

    def up(
        self,
        n_brokers: int,
        broker_overrides: dict[str, str] | None = None,
        zk_connect: str | None = None,
    ) -> LocalCluster:
        """Start ZooKeeper (unless `zk_connect` names an external one, chroot included)
        and brokers 1..n; return once every broker answers Metadata listing itself."""
        if n_brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        existing = self.data_dir / CLUSTER_FILE
        if existing.exists() and self._any_recorded_process_alive():
            raise ClusterError(f"a cluster is already running from {self.data_dir}; stop it first")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            if zk_connect is None:
                self.zookeeper = ZooKeeperServer(
                    self.data_dir / "zookeeper",
                    tick_time_ms=ZK_TICK_MS,
                    min_session_timeout_ms=ZK_MIN_SESSION_MS,
                    max_session_timeout_ms=ZK_MAX_SESSION_MS,
                ).start()
                self.zookeeper_pid = self.zookeeper.pid
                self.zookeeper_port = self.zookeeper.port
                self.zk_connect = self.zookeeper.connect_string
            else:
                self.zk_connect = zk_connect
            for broker_id in range(1, n_brokers + 1):
                port = free_port()
                self._write_server_properties(broker_id, port, broker_overrides or {})
                self.brokers[broker_id] = BrokerProcess(broker_id, port)
            for broker_id in self.brokers:
                self._spawn(broker_id)
            self._save()
            for broker_id in self.brokers:
                self._wait_ready(broker_id)
        except BaseException:
            self.stop()
            raise
        return self

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
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(broker_dir / "data"),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": str(DEFAULT_SESSION_TIMEOUT_MS),
            "strandline.logs.dir": str(broker_dir / "logs"),
        }
        settings.update(overrides)
        lines = [f"# written by strandline cluster up for broker {broker_id}"]
        lines += [f"{key}={value}" for key, value in settings.items()]
        self.config_path(broker_id).write_text("\n".join(lines) + "\n")

    def _spawn(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        with open(self.broker_out(broker_id), "ab") as out:
            out.write(
                f"--- starting broker {broker_id} at {time.strftime('%H:%M:%S')} ---\n".encode()
            )
            out.flush()
            process = subprocess.Popen(
                [*self.broker_command, "--config", str(self.config_path(broker_id))],
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
                response = answers_metadata("127.0.0.1", broker.port, timeout=2.0)
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
            f"broker {broker_id} did not answer Metadata on 127.0.0.1:{broker.port} within "
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
                response = answers_metadata(*self.broker_address(broker_id), timeout=2.0)
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

    def _terminate(self, pgid: int) -> None:
        _signal_group(pgid, signal.SIGTERM)
        _signal_group(pgid, signal.SIGCONT)  # a SIGSTOPped broker must see its TERM
        kill_process_group(pgid, grace_s=self.stop_grace_s)

    def stop(self) -> None:
        """TERM every broker (KILL after the grace period), then ZooKeeper. Nothing survives."""
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
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        elif self.zookeeper_pid is not None:
            kill_process_group(self.zookeeper_pid, grace_s=5.0)
        self.zookeeper_pid = None
        if (self.data_dir / CLUSTER_FILE).exists():
            self._save(stopped=True)

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
        state = {
            "bootstrap_servers": self.bootstrap,
            "zookeeper_connect": self.zk_connect,
            "zookeeper": {
                "pid": None if stopped else self.zookeeper_pid,
                "port": self.zookeeper_port,
                "embedded": self.zookeeper_port is not None,
            },
            "brokers": {
                str(broker_id): {
                    "pid": None if stopped else broker.pid,
                    "port": broker.port,
                    "config": str(self.config_path(broker_id)),
                    "log": str(self.broker_out(broker_id)),
                }
                for broker_id, broker in sorted(self.brokers.items())
            },
            "broker_command": self.broker_command,
        }
        path = self.data_dir / CLUSTER_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
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
        cluster.zookeeper_port = state["zookeeper"].get("port")
        zk_pid = state["zookeeper"].get("pid")
        if zk_pid is not None and _is_our_process(zk_pid, str(cluster.data_dir / "zookeeper")):
            cluster.zookeeper_pid = zk_pid
        for key, info in state["brokers"].items():
            broker_id = int(key)
            pid = info.get("pid")
            # A recorded pid is only trusted while it still runs our config (pids get reused).
            if pid is not None and not _is_our_process(pid, str(cluster.config_path(broker_id))):
                pid = None
            cluster.brokers[broker_id] = BrokerProcess(broker_id, int(info["port"]), pid)
        return cluster

    def _any_recorded_process_alive(self) -> bool:
        try:
            recorded = LocalCluster.load(self.data_dir)
        except (ClusterError, ValueError, KeyError):
            return False
        pids = [b.pid for b in recorded.brokers.values()] + [recorded.zookeeper_pid]
        return any(pid is not None and process_group_alive(pid) for pid in pids)

    # --- status ----------------------------------------------------------------------

    def status(self, timeout_s: float = 10.0) -> ClusterStatus:
        if self.zk_connect is None:
            raise ClusterError("cluster has no ZooKeeper connect string")
        with ZkClient(self.zk_connect, connect_timeout_s=timeout_s).connect() as zk:
            return read_cluster_status(zk)


def read_cluster_status(zk: ZkClient) -> ClusterStatus:
    live = zk.get_live_brokers()
    epoch = zk.get_controller_epoch()
    partitions: list[PartitionStatus] = []
    for topic in zk.get_all_topics():
        assignment = zk.get_topic_assignment(topic) or {}
        tps = [TopicPartition(topic, p) for p in sorted(assignment)]
        states = zk.get_partition_states(tps)
        for tp in tps:
            replicas = assignment[tp.partition]
            state = states.get(tp)
            leader = state[0].leader if state else None
            isr = state[0].isr if state else []
            partitions.append(
                PartitionStatus(
                    tp=tp,
                    leader=leader,
                    leader_epoch=state[0].leader_epoch if state else None,
                    replicas=replicas,
                    isr=isr,
                    offline=leader is None or leader < 0 or leader not in live,
                    under_replicated=len(isr) < len(replicas),
                )
            )
    return ClusterStatus(
        controller=zk.get_controller(),
        controller_epoch=epoch[0] if epoch else None,
        live_brokers={b: f"{r.host}:{r.port}" for b, r in live.items()},
        broker_epochs={b: r.epoch for b, r in live.items()},
        partitions=partitions,
    )


def answers_metadata(host: str, port: int, timeout: float = 2.0) -> object:
    """Ask ApiVersions v0 (every Kafka broker answers it), then send Metadata at the highest
    version both sides know; returns the Metadata response."""
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
