"""Launch Debian's ZooKeeper 3.8 as a child JVM bound to loopback.

We start `ZooKeeperServerMain` ourselves (never the `zookeeperd` service) so each
cluster or test session owns its ZooKeeper, its port and its data, and nothing
survives `stop()`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
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
INSTALL_HINT = (
    "install Debian's ZooKeeper and a JRE with "
    "`apt-get install -y zookeeper default-jre-headless` (never zookeeperd), or run `make setup`"
)


class ZooKeeperUnavailableError(RuntimeError):
    """java or the ZooKeeper jars are missing, or the server did not come up."""


def free_port() -> int:
    """An ephemeral loopback port the OS considers free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
    """One standalone ZooKeeper on 127.0.0.1:<free port>.

    `data_dir` holds zoo.cfg, the snapshots/logs and zookeeper.out; if omitted a
    temporary directory is used and removed on stop().
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
    ) -> None:
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
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

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
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    f"minSessionTimeout={self.min_session_timeout_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "4lw.commands.whitelist=srvr,ruok,stat",
                    # Tests create and drop thousands of znodes; keep snapshots cheap.
                    "autopurge.snapRetainCount=3",
                    "autopurge.purgeInterval=1",
                    "",
                ]
            )
        )
        return cfg

    def start(self) -> ZooKeeperServer:
        if self.process is not None:
            raise RuntimeError("ZooKeeper already started")
        java = find_java()
        classpath = zookeeper_classpath()
        # A port picked by free_port() can be taken before the JVM binds it (other
        # helpers start brokers concurrently); retry with a fresh one.
        attempts = 1 if self.requested_port else 3
        last_error = ""
        for _ in range(attempts):
            if not self.requested_port:
                self.port = free_port()
            cfg = self._write_config()
            log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
            try:
                self.process = subprocess.Popen(
                    [
                        java,
                        f"-Xmx{self.heap_mb}m",
                        "-XX:+UseSerialGC",
                        "-XX:TieredStopAtLevel=1",
                        "-Dzookeeper.jmx.log4j.disable=true",
                        "-cp",
                        classpath,
                        MAIN_CLASS,
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
            if self._wait_ready():
                return self
            last_error = self._tail_log()
            self._kill()
        raise ZooKeeperUnavailableError(
            f"ZooKeeper did not answer `srvr` on {self.connect_string} within "
            f"{self.start_timeout_s}s; tail of {self.log_path}:\n{last_error}"
        )

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
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
