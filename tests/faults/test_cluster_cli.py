"""The fault commands as an operator types them: `strandline cluster up --netns
--disk-limit-mb`, `partition`, `zk-kill`/`zk-start`, `fill-disk`/`free-disk`, `down`,
each a separate process reading cluster.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from strandline.faults import disk
from tests.waiting import wait_until


def strandline(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "strandline", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"strandline {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


@pytest.fixture
def data_dir(tmp_path: Path) -> object:
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"needs {', '.join(missing)}: run `make setup`", pytrace=False)
    directory = tmp_path / "cluster"
    yield directory
    strandline("cluster", "down", "--data-dir", str(directory), check=False)


def test_fault_commands_from_separate_processes(data_dir: Path) -> None:
    d = str(data_dir)
    up = strandline(
        "cluster",
        "up",
        "--brokers",
        "2",
        "--netns",
        "--disk-limit-mb",
        "24",
        "--data-dir",
        d,
        "--config",
        "zookeeper.session.timeout.ms=2000",
    )
    state = json.loads((data_dir / "cluster.json").read_text())
    ips = [state["brokers"][b]["ip"] for b in ("1", "2")]
    assert up.stdout.strip() == state["bootstrap_servers"] == ",".join(f"{ip}:9092" for ip in ips)
    assert all(state["brokers"][b]["netns"] for b in ("1", "2"))
    assert state["zookeepers"]["1"]["ip"] in state["zookeeper_connect"]
    assert state["disk_limit_mb"] == 24

    strandline("cluster", "partition", "--isolate", "2", "--data-dir", d)
    status = strandline("cluster", "status", "--data-dir", d).stdout
    assert "isolate" in status
    assert json.loads((data_dir / "cluster.json").read_text())["faults"]
    strandline("cluster", "partition", "--heal", "--data-dir", d)
    assert json.loads((data_dir / "cluster.json").read_text())["faults"] == []

    # Exactly one fault per call, and a clear error for a node that does not exist.
    both = strandline(
        "cluster", "partition", "--isolate", "1", "--heal", "--data-dir", d, check=False
    )
    assert both.returncode != 0
    unknown = strandline("cluster", "partition", "--isolate", "9", "--data-dir", d, check=False)
    assert unknown.returncode == 1 and "9" in unknown.stderr + unknown.stdout

    log_dir = data_dir / "broker-1" / "data"
    assert disk.is_limited(log_dir)
    filled = strandline("cluster", "fill-disk", "1", "--data-dir", d).stdout
    assert "full" in filled and (log_dir / disk.FILLER).exists()
    strandline("cluster", "free-disk", "1", "--data-dir", d)
    assert not (log_dir / disk.FILLER).exists()

    strandline("cluster", "zk-kill", "1", "--data-dir", d)
    # No quorum: status says so in one line instead of a traceback.
    lost = strandline("cluster", "status", "--data-dir", d, check=False)
    assert lost.returncode == 1 and "did not answer" in lost.stderr, lost.stderr
    assert "Traceback" not in lost.stderr
    strandline("cluster", "zk-start", "1", "--data-dir", d)
    # The brokers' sessions may have expired without a quorum: they register again
    # once it is back, and status shows them live then.
    wait_until(
        "a live broker in status after the quorum is back",
        lambda: "live" in strandline("cluster", "status", "--data-dir", d, check=False).stdout,
        timeout_s=60,
    )

    strandline("cluster", "down", "--data-dir", d)
    assert not disk.is_limited(log_dir)
    # The logs were copied off the tmpfs, so they can still be verified offline.
    assert any(log_dir.iterdir())
    assert not subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True
    ).stdout.count(state["network"]["tag"])


def test_fault_commands_need_a_netns_cluster(tmp_path: Path, zk_connect: str) -> None:
    d = str(tmp_path / "plain")
    strandline("cluster", "up", "--brokers", "1", "--zookeeper", zk_connect, "--data-dir", d)
    try:
        refused = strandline("cluster", "partition", "--isolate", "1", "--data-dir", d, check=False)
        assert refused.returncode == 1
        assert "--netns" in refused.stderr + refused.stdout
        no_disk = strandline("cluster", "fill-disk", "1", "--data-dir", d, check=False)
        assert no_disk.returncode == 1
        assert "--disk-limit-mb" in no_disk.stderr + no_disk.stdout
    finally:
        strandline("cluster", "down", "--data-dir", d, check=False)
