"""Launch Debian's ZooKeeper 3.8 as a child JVM bound to loopback.

We start `ZooKeeperServerMain` ourselves (never the `zookeeperd` service) so each
cluster or test session owns its ZooKeeper, its port and its data, and nothing
survives `stop()`.

A server can also be one member of an ensemble (`ensemble=` and `server_id=`): it then
runs `QuorumPeerMain`, binds its own address (e.g. its network namespace's IP, entered
through `command_prefix=["ip", "netns", "exec", NS]`) and is ready once `srvr` reports
it as leader or follower, i.e. once a quorum has formed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

JAVA_DIR = Path("/usr/share/java")
# Verified on Debian 12's zookeeper 3.8 package: ZooKeeperServerMain needs these.
CLASSPATH_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "slf4j-simple",
    "netty-handler",
    "netty-common",
    "netty-buffer",
    "netty-transport",
    "netty-codec",
    "netty-resolver",
    "netty-transport-native-epoll",
    "netty-transport-native-unix-common",
    "metrics-core",
    "commons-cli",
)
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LOOPBACK = "127.0.0.1"
INSTALL_HINT = (
    "install Debian's ZooKeeper and a JRE with "
    "`apt-get install -y zookeeper default-jre-headless` (never zookeeperd), or run `make setup`"
)


class ZooKeeperUnavailableError(RuntimeError):
    """java or the ZooKeeper jars are missing, or the server did not come up."""


# Ports for our servers come from below the kernel's ephemeral range: a port picked there
# cannot be taken, between the pick and the server's bind, by the source port of some
# client's outgoing connection (seen in CI: a broker's port taken by a test's client).
_LISTEN_PORTS_FROM = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_pick = random.SystemRandom()  # not `random`: test plugins reseed it the same in every worker


def port_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could bind `host:port` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = LOOPBACK) -> int:
    """A port free on `host` right now, outside the range outgoing connections draw from."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32_768  # Linux's default
    if ephemeral_low - _LISTEN_PORTS_FROM >= 1_000:
        for _ in range(100):
            port = _pick.randrange(_LISTEN_PORTS_FROM, ephemeral_low)
            if port_free(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # let the kernel choose
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (srvr, ruok, stat) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailableError(f"`java` is not on PATH: {INSTALL_HINT}")
    return java


def zookeeper_classpath() -> str:
    jars = [JAVA_DIR / f"{name}.jar" for name in CLASSPATH_JARS]
    missing = [str(jar) for jar in jars if not jar.exists()]
    if missing:
        raise ZooKeeperUnavailableError(
            f"ZooKeeper jars missing ({', '.join(missing)}): {INSTALL_HINT}"
        )
    return os.pathsep.join(str(jar) for jar in jars)


class ZooKeeperServer:
    """One standalone ZooKeeper on 127.0.0.1:<free port>, or one ensemble member.

    `data_dir` holds zoo.cfg, the snapshots/logs and zookeeper.out; if omitted a
    temporary directory is used and removed on stop().

    Ensemble members get `server_id` (written to data/myid), `ensemble` mapping every
    member's id to (host, quorum port, election port), and `host`, the address they
    serve clients on. An ensemble member needs an explicit `port`: the others never
    learn a client port, but the launcher must know it to build a connect string.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        port: int | None = None,
        tick_time_ms: int = 200,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        start_timeout_s: float = 30.0,
        heap_mb: int = 128,
        host: str = LOOPBACK,
        server_id: int | None = None,
        ensemble: Mapping[int, tuple[str, int, int]] | None = None,
        command_prefix: list[str] | None = None,
        init_limit: int = 10,
        sync_limit: int = 5,
    ) -> None:
        if (server_id is None) != (ensemble is None):
            raise ValueError("an ensemble member needs both server_id and ensemble")
        if ensemble is not None and (port is None or server_id not in ensemble):
            raise ValueError("an ensemble member needs a fixed port and its own server line")
        self._owns_dir = data_dir is None
        self.data_dir = (
            Path(data_dir)
            if data_dir is not None
            else Path(tempfile.mkdtemp(prefix="strandline-zk-"))
        )
        self.requested_port = port
        self.port = port or 0
        self.tick_time_ms = tick_time_ms
        # ZooKeeper clamps session timeouts to [2, 20] ticks unless told otherwise.
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 20 * tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.heap_mb = heap_mb
        self._host = host
        self.server_id = server_id
        self.ensemble = dict(ensemble) if ensemble is not None else None
        self.command_prefix = list(command_prefix or [])
        # In ticks. initLimit bounds a follower's initial sync with the leader, syncLimit
        # how far it may lag before being dropped: with 200 ms ticks, 2 s and 1 s, short
        # enough for fast failover tests, long enough for a small, idle data set.
        self.init_limit = init_limit
        self.sync_limit = sync_limit
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return self._host

    @property
    def is_ensemble_member(self) -> bool:
        return self.ensemble is not None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.out"

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "4lw.commands.whitelist=srvr,ruok,stat",
            # Tests create and drop thousands of znodes; keep snapshots cheap.
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        if self.ensemble is not None:
            assert self.server_id is not None
            (self.data_dir / "data" / "myid").write_text(f"{self.server_id}\n")
            lines += [
                f"initLimit={self.init_limit}",
                f"syncLimit={self.sync_limit}",
                # A static ensemble: without this 3.5+ moves the server lines into a
                # zoo.cfg.dynamic file on first start, which a restart then has to match.
                "reconfigEnabled=false",
                "standaloneEnabled=false",
            ]
            lines += [
                f"server.{sid}={host}:{quorum}:{election}"
                for sid, (host, quorum, election) in sorted(self.ensemble.items())
            ]
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def start(self, wait: bool = True) -> ZooKeeperServer:
        """Launch the JVM; with `wait`, return once it serves (see `wait_ready`).

        Ensemble members are usually started with wait=False, all of them, and then
        waited for: none is ready before a quorum of them runs.
        """
        if self.process is not None:
            raise RuntimeError("ZooKeeper already started")
        if self.is_ensemble_member:
            self._launch()
            if wait:
                self.wait_ready()
            return self
        # A port picked by free_port() can be taken before the JVM binds it (other
        # helpers start brokers concurrently); retry with a fresh one.
        attempts = 1 if self.requested_port else 3
        last_error = ""
        for _ in range(attempts):
            if not self.requested_port:
                self.port = free_port()
            self._launch()
            if self._wait_ready():
                return self
            last_error = self._tail_log()
            self._kill()
        raise ZooKeeperUnavailableError(
            f"ZooKeeper did not answer `srvr` on {self.connect_string} within "
            f"{self.start_timeout_s}s; tail of {self.log_path}:\n{last_error}"
        )

    def _launch(self) -> None:
        java = find_java()
        classpath = zookeeper_classpath()
        cfg = self._write_config()
        main_class = QUORUM_MAIN_CLASS if self.is_ensemble_member else MAIN_CLASS
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            # `ip netns exec` execs the JVM in place, so the pid (and process group) we
            # get is the JVM's own and kill()/stop() reach it.
            self.process = subprocess.Popen(
                [
                    *self.command_prefix,
                    java,
                    f"-Xmx{self.heap_mb}m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-Dzookeeper.jmx.log4j.disable=true",
                    "-cp",
                    classpath,
                    main_class,
                    str(cfg),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() kills all of it
                cwd=self.data_dir,
            )
        finally:
            log.close()

    def mode(self, timeout: float = 0.5) -> str | None:
        """The mode `srvr` reports (leader, follower, standalone); None if the server
        doesn't answer or isn't serving (an ensemble member without quorum)."""
        return server_mode(self.host, self.port, timeout=timeout)

    def wait_ready(self) -> None:
        """Block until the server serves; ZooKeeperUnavailableError with the log's tail
        if it exits or the start timeout passes first."""
        if not self._wait_ready():
            raise ZooKeeperUnavailableError(
                f"ZooKeeper server {self.server_id or ''} did not report a serving mode on "
                f"{self.connect_string} within {self.start_timeout_s}s; tail of "
                f"{self.log_path}:\n{self._tail_log()}"
            )

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if self.is_ensemble_member:
                if self.mode() in ("leader", "follower"):
                    return True
            else:
                try:
                    if "Mode:" in four_letter_word(self.host, self.port, "srvr", timeout=0.5):
                        return True
                except OSError:
                    pass
            time.sleep(0.05)
        return False

    def _tail_log(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _kill(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        kill_process_group(process.pid, grace_s=5.0)
        process.wait()

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, not a shutdown); the data
        dir stays, so start() brings the same server back."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        kill_process_group(process.pid, grace_s=0)

    def stop(self) -> None:
        self._kill()
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def server_mode(host: str, port: int, timeout: float = 0.5) -> str | None:
    """The `Mode:` line of `srvr` ("leader", "follower", "standalone"), or None when the
    server doesn't answer or answers without one (not serving: no quorum)."""
    try:
        answer = four_letter_word(host, port, "srvr", timeout=timeout)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def kill_process_group(pgid: int, grace_s: float) -> None:
    """TERM a whole process group, then KILL it if it is still there after `grace_s`.

    Returns once no process of the group is left (or it's not ours to wait for).
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not process_group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and process_group_alive(pgid):
        time.sleep(0.02)


def process_group_alive(pgid: int) -> bool:
    """True while some non-zombie process is in the group (reaping our own zombie leader)."""
    try:
        os.waitpid(pgid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (e.g. `cluster down` from another process)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
