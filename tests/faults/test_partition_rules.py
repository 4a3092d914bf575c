"""The pure half of network faults: which node pairs a fault set blocks, and the nftables
scripts that follow. No root, no namespaces."""

from __future__ import annotations

import pytest

from strandline.faults.netns import NetworkSpec, cluster_tag, node_host_number
from strandline.faults.partition import (
    FaultError,
    all_blocked_pairs,
    from_zookeeper_fault,
    groups_fault,
    isolate_fault,
    one_way_fault,
    rulesets,
)

NODES = ["1", "2", "3", "zk1", "zk2", "zk3"]
IPS = {n: f"10.9.9.{node_host_number(n)}" for n in NODES}
BRIDGE = "10.9.9.1"


def both(a: str, b: str) -> set[tuple[str, str]]:
    return {(a, b), (b, a)}


def test_groups_cut_across_and_unnamed_nodes_form_one_more_group() -> None:
    blocked = all_blocked_pairs([groups_fault([["1", "zk1"], ["2"]])], NODES)
    rest = ["3", "zk2", "zk3"]
    # Inside each group (the implicit one included) everything flows.
    assert both("1", "zk1").isdisjoint(blocked)
    assert all((a, b) not in blocked for a in rest for b in rest)
    # Across groups nothing does, in either direction.
    for a in ("1", "zk1"):
        assert both(a, "2") <= blocked
        for b in rest:
            assert both(a, b) <= blocked
    assert all(both("2", b) <= blocked for b in rest)


def test_isolate_cuts_one_node_from_all_others_only() -> None:
    blocked = all_blocked_pairs([isolate_fault("2")], NODES)
    assert blocked == {p for n in NODES if n != "2" for p in both("2", n)}


def test_one_way_is_one_direction() -> None:
    assert all_blocked_pairs([one_way_fault("1", "2")], NODES) == {("1", "2")}


def test_from_zookeeper_cuts_only_zookeeper_links() -> None:
    blocked = all_blocked_pairs([from_zookeeper_fault("3")], NODES)
    assert blocked == both("3", "zk1") | both("3", "zk2") | both("3", "zk3")


def test_faults_compose_by_union() -> None:
    blocked = all_blocked_pairs([one_way_fault("1", "2"), from_zookeeper_fault("1")], NODES)
    assert blocked == {("1", "2")} | {p for z in ("zk1", "zk2", "zk3") for p in both("1", z)}


@pytest.mark.parametrize(
    "fault",
    [
        isolate_fault("9"),
        one_way_fault("1", "1"),
        one_way_fault("1", "zk7"),
        from_zookeeper_fault("zk1"),
        groups_fault([["1"], ["1", "2"]]),
        {"kind": "flood"},
    ],
)
def test_bad_faults_are_refused(fault: dict[str, object]) -> None:
    with pytest.raises(FaultError):
        all_blocked_pairs([fault], NODES)


def test_rulesets_drop_node_addresses_and_never_the_bridge() -> None:
    scripts = rulesets([one_way_fault("1", "2")], IPS, BRIDGE)
    assert set(scripts) == set(NODES)
    # The sender drops on output, the receiver on input; nobody else gets rules.
    assert "ip daddr { 10.9.9.12 } drop" in scripts["1"]
    assert "drop" not in scripts["1"].split("chain output")[0]  # its input chain
    assert "ip saddr { 10.9.9.11 } drop" in scripts["2"]
    assert "drop" not in scripts["3"] and "drop" not in scripts["zk1"]
    for script in scripts.values():
        # Atomic replacement: declare (so delete can't fail), delete, recreate.
        assert script.startswith("table inet strandline\ndelete table inet strandline\n")
        dropped = [line for line in script.splitlines() if line.strip().endswith("drop")]
        addresses = {t.strip("{},") for line in dropped for t in line.split()}
        assert BRIDGE not in addresses


def test_heal_leaves_every_namespace_without_a_table() -> None:
    scripts = rulesets([], IPS, BRIDGE)
    assert all(
        s == "table inet strandline\ndelete table inet strandline\n" for s in scripts.values()
    )


def test_isolated_node_still_accepts_the_bridge_first() -> None:
    script = rulesets([isolate_fault("zk2")], IPS, BRIDGE)["zk2"]
    lines = [line.strip() for line in script.splitlines()]
    accept = lines.index(f"ip saddr {BRIDGE} accept")
    drop = next(i for i, line in enumerate(lines) if line.startswith("ip saddr {"))
    assert accept < drop
    for n in NODES:
        if n != "zk2":
            assert IPS[n] in lines[drop]


def test_names_fit_interfaces_and_clusters_differ() -> None:
    spec = NetworkSpec(tag=cluster_tag("/tmp/a"), subnet="10.231.5.0/24", nodes=NODES)
    assert cluster_tag("/tmp/a") != cluster_tag("/tmp/b")
    for node in [*NODES, "99", "zk50"]:
        assert len(spec.host_veth(node)) <= 15 and len(spec.peer_veth(node)) <= 15
    assert spec.ip("2") == "10.231.5.12" and spec.ip("zk3") == "10.231.5.203"
    assert spec.bridge_ip == "10.231.5.1"
    assert NetworkSpec.from_json(spec.to_json()) == spec
