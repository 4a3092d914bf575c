"""The local-cluster launcher and `strandline cluster ...` with real broker processes and
the session's real ZooKeeper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from strandline.coordination.zk_client import ZkClient
from strandline.coordination.znodes import LeaderAndIsr
from strandline.coordination.zookeeper_server import ZooKeeperServer, process_group_alive
from strandline.launcher.local_cluster import (
    ClusterError,
    LocalCluster,
    answers_metadata,
    read_cluster_status,
)
from strandline.types import TopicPartition
from tests.waiting import wait_until

ClusterFactory = Callable[..., LocalCluster]


def process_state(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    raise AssertionError("no State line")


def test_cluster_up_writes_layout_and_every_broker_answers(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, num_partitions=3)
    hosts = cluster.bootstrap.split(",")
    assert len(hosts) == 2
    for host_port in hosts:
        host, port = host_port.split(":")
        assert host == "127.0.0.1"
        answers_metadata(host, int(port))

    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    assert state["bootstrap_servers"] == cluster.bootstrap
    assert state["zookeeper_connect"] == cluster.zk_connect
    assert set(state["brokers"]) == {"1", "2"}
    properties = cluster.broker_dir(1) / "server.properties"
    text = properties.read_text()
    broker_port = cluster.brokers[1].port
    for line in (
        "broker.id=1",
        f"listeners=PLAINTEXT://127.0.0.1:{broker_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}",
        f"log.dirs={cluster.broker_dir(1) / 'data'}",
        f"zookeeper.connect={cluster.zk_connect}",
        f"strandline.logs.dir={cluster.broker_dir(1) / 'logs'}",
        "num.partitions=3",
    ):
        assert line in text.splitlines()
    assert (cluster.broker_dir(1) / "broker.out").exists()

    status = cluster.status()
    assert sorted(status.live_brokers) == [1, 2]
    assert status.controller in (1, 2) and (status.controller_epoch or 0) >= 1


def test_kill_restart_and_stop_continue(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1, zookeeper_session_timeout_ms=1000)
    first_epoch = cluster.status().broker_epochs[1]
    pid = cluster.brokers[1].pid
    assert pid is not None

    cluster.kill(1, "STOP")
    wait_until("the broker process to stop", lambda: process_state(pid) == "T", 10.0)
    cluster.kill(1, "CONT")
    wait_until("the broker process to continue", lambda: process_state(pid) != "T", 10.0)

    cluster.kill(1, signal.SIGKILL)
    assert not process_group_alive(pid)
    wait_until(
        "broker 1 to deregister",
        lambda: 1 not in cluster.status().live_brokers,
        10.0,
    )
    assert cluster.unexpected_deaths() == {}  # killed on purpose

    cluster.start(1)
    assert cluster.brokers[1].pid != pid
    assert cluster.status().broker_epochs[1] > first_epoch
    with pytest.raises(ClusterError, match="already running"):
        cluster.start(1)

    # A death nobody asked for is reported with the broker's output.
    new_pid = cluster.brokers[1].pid
    assert new_pid is not None
    os.killpg(new_pid, signal.SIGKILL)
    wait_until("broker 1 to exit", lambda: not cluster.is_running(1), 10.0)
    deaths = cluster.unexpected_deaths()
    assert list(deaths) == [1] and "starting broker 1" in deaths[1]
    cluster.kill(1, "KILL")  # acknowledged: teardown has nothing to report
    assert cluster.unexpected_deaths() == {}


def test_stop_leaves_no_process(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c")
    cluster.up(
        1,
        {"zookeeper.session.timeout.ms": "2000"},
        zk_connect=f"{zookeeper.connect_string}/s-{uuid.uuid4().hex[:8]}",
    )
    pids = [b.pid for b in cluster.brokers.values()]
    cluster.kill(1, "STOP")  # a stopped broker must still go away
    cluster.stop()
    assert all(pid is not None and not process_group_alive(pid) for pid in pids)
    state = json.loads((tmp_path / "c" / "cluster.json").read_text())
    assert all(info["pid"] is None for info in state["brokers"].values())


def test_embedded_zookeeper_is_stopped_last(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c").up(1)
    zk_pid = cluster.zookeeper_pid
    assert zk_pid is not None and cluster.zk_connect is not None
    assert (tmp_path / "c" / "zookeeper" / "zoo.cfg").exists()
    assert 1 in cluster.status().live_brokers
    cluster.stop()
    assert not process_group_alive(zk_pid)


def test_broker_that_dies_at_start_raises_with_its_output(zk_connect: str, tmp_path: Path) -> None:
    crash = [sys.executable, "-c", "import sys; print('no such luck'); sys.exit(3)", "broker"]
    cluster = LocalCluster(tmp_path / "c", broker_command=crash)
    with pytest.raises(ClusterError, match="(?s)broker 1 exited during start-up.*no such luck"):
        cluster.up(1, zk_connect=zk_connect)


def test_status_marks_offline_and_under_replicated(zk_connect: str) -> None:
    with ZkClient(zk_connect).connect() as zk:
        zk.register_broker(1, "127.0.0.1", 1111)
        zk.register_broker(2, "127.0.0.1", 2222)
        assert zk.try_elect_controller(2) == 1
        zk.create_topic("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, {})
        zk.create_partition_state(TopicPartition("t", 0), LeaderAndIsr(1, 0, [1, 2], 1))
        zk.create_partition_state(TopicPartition("t", 1), LeaderAndIsr(2, 3, [2], 1))
        zk.create_partition_state(TopicPartition("t", 2), LeaderAndIsr(3, 0, [3], 1))
        status = read_cluster_status(zk)
    assert (status.controller, status.controller_epoch) == (2, 1)
    assert status.live_brokers == {1: "127.0.0.1:1111", 2: "127.0.0.1:2222"}
    marks = {p.tp.partition: (p.leader, p.offline, p.under_replicated) for p in status.partitions}
    assert marks == {0: (1, False, False), 1: (2, False, True), 2: (3, True, True)}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strandline", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def test_cli_up_status_kill_start_down(tmp_path: Path) -> None:
    # The everyday form: an embedded ZooKeeper that `down`, run by another process, stops.
    data_dir = str(tmp_path / "cli")
    up = run_cli(
        "up",
        "--brokers",
        "1",
        "--data-dir",
        data_dir,
        "--config",
        "zookeeper.session.timeout.ms=1000",
        "--config",
        "num.partitions=2",
    )
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "cli" / "cluster.json").read_text())
    assert up.stdout.strip() == state["bootstrap_servers"]
    pids = [info["pid"] for info in state["brokers"].values()] + [state["zookeeper"]["pid"]]
    assert state["zookeeper"]["embedded"] and all(pid is not None for pid in pids)
    try:
        # The brokers outlived the `up` command.
        for host_port in up.stdout.strip().split(","):
            host, port = host_port.split(":")
            answers_metadata(host, int(port))
        status = run_cli("status", "--data-dir", data_dir)
        assert status.returncode == 0, status.stderr
        assert "controller" in status.stdout and "live" in status.stdout

        killed = run_cli("kill", "1", "--data-dir", data_dir, "--signal", "KILL")
        assert killed.returncode == 0, killed.stderr
        assert not process_group_alive(pids[0])
        started = run_cli("start", "1", "--data-dir", data_dir)
        assert started.returncode == 0, started.stderr
        pids.append(
            json.loads((tmp_path / "cli" / "cluster.json").read_text())["brokers"]["1"]["pid"]
        )

        bad = run_cli("kill", "9", "--data-dir", data_dir)
        assert bad.returncode == 1 and "no broker 9" in bad.stderr
    finally:
        down = run_cli("down", "--data-dir", data_dir)
    assert down.returncode == 0, down.stderr
    assert not any(process_group_alive(pid) for pid in pids)
