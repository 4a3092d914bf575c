"""Host-shaped clusters: `cluster up --hosts 3 --brokers-per-host 2 --netns` runs two
broker processes in each of three network namespaces (one per "host"), broker.rack =
host, and losing a whole host loses nothing acknowledged.

Needs root, `ip` and `nft`; without them the netns test FAILS (never skips)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from strandline.launcher.local_cluster import ClusterError, LocalCluster, host_layout
from tests.cli.support import tool
from tests.cluster.support import create_topic
from tests.faults.test_netns_cluster import SETTINGS, PacedProducer, assert_nothing_acked_lost
from tests.waiting import wait_until

_run, _ok, fails = tool("cluster", "up")
_run_kill, _ok_kill, fails_kill = tool("cluster", "kill-host")


def test_brokers_must_equal_hosts_times_brokers_per_host(tmp_path: Path) -> None:
    line = fails(
        "--data-dir", str(tmp_path / "c"), "--hosts", "3", "--brokers-per-host", "2",
        "--brokers", "5",
    )  # fmt: skip
    assert "--brokers 5 does not match --hosts 3 x --brokers-per-host 2 = 6" in line
    assert "--hosts and --brokers-per-host go together" in fails(
        "--data-dir", str(tmp_path / "c"), "--hosts", "3"
    )
    assert not (tmp_path / "c").exists(), "a refused `up` must not leave a cluster dir behind"
    assert host_layout(None, 3, 2) == {
        1: "host1", 2: "host1", 3: "host2", 4: "host2", 5: "host3", 6: "host3"
    }  # fmt: skip
    assert host_layout(6, 3, 2) == host_layout(None, 3, 2)
    assert host_layout(4, None, None) == {}
    assert "no cluster in" in fails_kill("host1", "--data-dir", str(tmp_path / "c"))


def test_losing_a_whole_host_loses_nothing_acknowledged(tmp_path: Path) -> None:
    missing = [t for t in ("ip", "nft") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        pytest.fail(
            "needs root, `ip` and `nft` (`make system-deps`) to build namespaces", pytrace=False
        )
    cluster = LocalCluster(tmp_path / "hosts")
    try:
        cluster.up(6, dict(SETTINGS), netns=True, hosts=3, brokers_per_host=2)
        cluster.wait_for_full_metadata()
        state = json.loads((cluster.data_dir / "cluster.json").read_text())
        assert {b: info["host"] for b, info in state["brokers"].items()} == {
            "1": "host1", "2": "host1", "3": "host2", "4": "host2", "5": "host3", "6": "host3"
        }  # fmt: skip
        # Two brokers per namespace: one IP, two ports.
        assert state["brokers"]["3"]["ip"] == state["brokers"]["4"]["ip"]
        assert (state["brokers"]["3"]["port"], state["brokers"]["4"]["port"]) == (9092, 9093)
        assert state["brokers"]["3"]["netns"] == state["brokers"]["4"]["netns"]
        assert len({info["ip"] for info in state["brokers"].values()}) == 3
        assert "broker.rack=host2" in cluster.config_path(4).read_text().splitlines()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        racks = {node.id: node.rack for node in admin.describe_cluster().result(10).nodes}
        assert racks == {1: "host1", 2: "host1", 3: "host2", 4: "host2", 5: "host3", 6: "host3"}

        # Network faults name hosts, not brokers, in a host-shaped cluster.
        with pytest.raises(ClusterError, match="unknown node.*nodes are host1, host2, host3, zk1"):
            cluster.isolate("3")
        create_topic(cluster, "hosts", 6, 3, min_insync_replicas="2")

        host_of = {b: p.host_name for b, p in cluster.brokers.items()}
        for p in cluster.status().partitions:
            if p.tp.topic == "hosts":
                spread = sorted(str(host_of[r]) for r in p.replicas)
                assert spread == ["host1", "host2", "host3"], f"{p.tp}: replicas {p.replicas}"

        with PacedProducer(cluster, "hosts") as writer:
            wait_until("acknowledged writes", lambda: len(writer.acked) > 100)
            killed_at = time.monotonic()
            with pytest.raises(ClusterError, match="no host 'host9'; hosts: host1, host2, host3"):
                cluster.kill_host("host9")
            victims = cluster.kill_host("host2")
            assert victims == [3, 4] and not any(cluster.is_running(b) for b in victims)

            def all_led_elsewhere() -> bool:
                parts = [p for p in cluster.status().partitions if p.tp.topic == "hosts"]
                return all(not p.offline and p.leader not in victims for p in parts)

            wait_until("every partition led by a surviving host", all_led_elsewhere, 30)
            recovered = time.monotonic() - killed_at
            acked_at_recovery = len(writer.acked)
            wait_until(
                "writes acknowledged after the host loss",
                lambda: writer.acks_since(killed_at + recovered) > 50,
            )
            gap = writer.longest_gap(killed_at - 1, time.monotonic())
        print(
            f"\nhost2 (brokers 3, 4) killed: every partition led elsewhere after "
            f"{recovered:.2f}s, longest gap between acks {gap:.2f}s; {len(writer.acked)} acked "
            f"of {writer.sent} sent ({acked_at_recovery} when leaders were back)"
        )
        assert not writer.errors, writer.errors[:5]
        assert_nothing_acked_lost(cluster, "hosts", writer.acked)
    finally:
        for broker_id, tail in cluster.unexpected_deaths().items():
            print(f"\n--- broker {broker_id} died unexpectedly ---\n{tail}")
        cluster.stop()
    assert cluster.network is None or not cluster.network.exists()
