"""Network faults as data, nftables rulesets computed from them, and the shell that
loads those rulesets into each node's namespace.

A fault set is a list of fault descriptions (JSON-friendly dicts, stored in cluster.json
under "faults" so another process can add to it or heal it)::

    {"kind": "groups", "groups": [["1", "2"], ["3", "zk1"]]}
    {"kind": "isolate", "node": "2"}
    {"kind": "one_way", "src": "1", "dst": "2"}
    {"kind": "from_zookeeper", "broker": "2"}

Each fault denies a set of directed (src, dst) node pairs; faults compose by union, and
heal is the empty list. Semantics:

* groups: nodes in different groups cannot talk (both directions). Every node named in
  no group belongs to one extra, implicit group together with the other unnamed nodes,
  so `--groups 1/2` on a 3-broker, 3-ZooKeeper cluster yields {1}, {2}, {3,zk1,zk2,zk3}.
* isolate(n): n can talk to no other node, both directions.
* one_way(a, b): packets a -> b are dropped (in a's output and b's input); b -> a
  packets pass. With TCP that stops every a<->b connection from carrying data (a's
  segments, ACKs included, never arrive), so it differs from a full cut mostly in what
  each side observes (b sees silence, a sees b's retransmissions); it is the asymmetric
  link of the Jepsen literature, not a firewall that lets b-initiated sessions live.
* from_zookeeper(b): broker b and every ZooKeeper server cannot talk; b still reaches
  brokers and clients. This is the zombie-leader case.

Only node-to-node traffic is filtered: the root namespace (the bridge address: clients,
tests, `strandline cluster status`) is never named in a rule, so a partitioned or
isolated node still serves clients — which is the point of the exercise.

Rules drop (not reject) so peers see a silent network, as in a real partition, and time
out rather than fail fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from strandline.faults.netns import run

TABLE_FAMILY = "inet"
TABLE_NAME = "strandline"

Fault = dict[str, Any]
Pair = tuple[str, str]


class FaultError(ValueError):
    """A fault names a node that doesn't exist, or is malformed."""


def is_zookeeper(node: str) -> bool:
    return node.startswith("zk")


def groups_fault(groups: list[list[str]]) -> Fault:
    return {"kind": "groups", "groups": [list(g) for g in groups]}


def isolate_fault(node: str) -> Fault:
    return {"kind": "isolate", "node": node}


def one_way_fault(src: str, dst: str) -> Fault:
    return {"kind": "one_way", "src": src, "dst": dst}


def from_zookeeper_fault(broker: str) -> Fault:
    return {"kind": "from_zookeeper", "broker": broker}


def _check_nodes(named: Iterable[str], nodes: Iterable[str]) -> None:
    known = set(nodes)
    unknown = sorted(set(named) - known)
    if unknown:
        raise FaultError(
            f"unknown node(s) {', '.join(unknown)}; nodes are {', '.join(sorted(known))}"
        )


def blocked_pairs(fault: Fault, nodes: Iterable[str]) -> set[Pair]:
    """The directed (src, dst) pairs one fault denies, for a cluster made of `nodes`."""
    all_nodes = sorted(set(nodes))
    kind = fault.get("kind")
    pairs: set[Pair] = set()
    if kind == "groups":
        groups = [list(g) for g in fault["groups"]]
        named = [n for g in groups for n in g]
        _check_nodes(named, all_nodes)
        if len(named) != len(set(named)):
            raise FaultError(f"a node appears in more than one group: {groups}")
        membership = {n: i for i, g in enumerate(groups) for n in g}
        rest = len(groups)  # the implicit group of every node named nowhere
        for a in all_nodes:
            for b in all_nodes:
                if a != b and membership.get(a, rest) != membership.get(b, rest):
                    pairs.add((a, b))
    elif kind == "isolate":
        node = fault["node"]
        _check_nodes([node], all_nodes)
        for other in all_nodes:
            if other != node:
                pairs |= {(node, other), (other, node)}
    elif kind == "one_way":
        src, dst = fault["src"], fault["dst"]
        _check_nodes([src, dst], all_nodes)
        if src == dst:
            raise FaultError(f"one_way needs two different nodes, got {src} twice")
        pairs.add((src, dst))
    elif kind == "from_zookeeper":
        broker = fault["broker"]
        _check_nodes([broker], all_nodes)
        if is_zookeeper(broker):
            raise FaultError(f"from_zookeeper takes a broker, not {broker}")
        for zk in (n for n in all_nodes if is_zookeeper(n)):
            pairs |= {(broker, zk), (zk, broker)}
    else:
        raise FaultError(f"unknown fault kind {kind!r}")
    return pairs


def all_blocked_pairs(faults: Iterable[Fault], nodes: Iterable[str]) -> set[Pair]:
    nodes = list(nodes)
    blocked: set[Pair] = set()
    for fault in faults:
        blocked |= blocked_pairs(fault, nodes)
    return blocked


def rulesets(faults: Iterable[Fault], ips: Mapping[str, str], bridge_ip: str) -> dict[str, str]:
    """nft scripts, one per node (keyed by node name), for the given active faults.

    Every script first creates-then-deletes the table and then recreates it, all in one
    `nft -f` transaction: the namespace switches atomically from the old rules to the
    new, and a script for a node with nothing blocked just leaves it without a table.
    """
    blocked = all_blocked_pairs(faults, ips)
    scripts: dict[str, str] = {}
    for node in sorted(ips):
        drop_out = sorted(ips[dst] for src, dst in blocked if src == node)
        drop_in = sorted(ips[src] for src, dst in blocked if dst == node)
        lines = [
            f"table {TABLE_FAMILY} {TABLE_NAME}",
            f"delete table {TABLE_FAMILY} {TABLE_NAME}",
        ]
        if drop_out or drop_in:
            lines.append(f"table {TABLE_FAMILY} {TABLE_NAME} {{")
            for chain, hook, direction, addrs in (
                ("input", "input", "saddr", drop_in),
                ("output", "output", "daddr", drop_out),
            ):
                lines.append(f"\tchain {chain} {{")
                lines.append(f"\t\ttype filter hook {hook} priority filter; policy accept;")
                # Belt and braces: the bridge (root namespace) is never a node, but say
                # so explicitly so clients keep reaching a partitioned node whatever else.
                lines.append(f"\t\tip {direction} {bridge_ip} accept")
                if addrs:
                    lines.append(f"\t\tip {direction} {{ {', '.join(addrs)} }} drop")
                lines.append("\t}")
            lines.append("}")
        scripts[node] = "\n".join(lines) + "\n"
    return scripts


def apply_rulesets(scripts: Mapping[str, str], netns: Mapping[str, str]) -> None:
    """Load each node's script into its namespace (`ip netns exec NS nft -f -`)."""
    for node, script in scripts.items():
        run(["ip", "netns", "exec", netns[node], "nft", "-f", "-"], input_text=script)


def describe(fault: Fault) -> str:
    """One line for `cluster status` and error messages."""
    kind = fault.get("kind")
    if kind == "groups":
        return "groups " + " / ".join(",".join(g) for g in fault["groups"])
    if kind == "isolate":
        return f"isolate {fault['node']}"
    if kind == "one_way":
        return f"one-way {fault['src']} -x-> {fault['dst']}"
    if kind == "from_zookeeper":
        return f"broker {fault['broker']} cut from ZooKeeper"
    return repr(fault)
