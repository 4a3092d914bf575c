"""One network namespace per node, all plugged into one bridge in the root namespace.

Picture for a cluster whose tag is `3fa2` and subnet 10.231.87.0/24::

    root namespace (clients, tests)        slb3fa2  10.231.87.1/24  (bridge)
      |- sl3fa2h1   <veth>  eth0 in netns sl3fa2-1    10.231.87.11   broker 1
      |- sl3fa2h2   <veth>  eth0 in netns sl3fa2-2    10.231.87.12   broker 2
      |- sl3fa2hzk1 <veth>  eth0 in netns sl3fa2-zk1  10.231.87.201  ZooKeeper server 1

The bridge has an address so that a client in the root namespace reaches every node
directly (the kernel's connected route for the /24 points at the bridge); the nodes need
no default route because everything they talk to is on the same /24. Every name carries
the tag (a hash of the data dir) so two clusters, e.g. two tests, can coexist.

Everything here shells out to `ip`; the state needed to undo it lives in cluster.json
(`NetworkSpec.to_json`), so `teardown()` also works from a fresh process.
"""

from __future__ import annotations

import hashlib
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SUBNET_PREFIX = "10.231"
BROKER_HOST_BASE = 10  # broker k -> .(10+k)
ZK_HOST_BASE = 200  # ZooKeeper server k -> .(200+k)
HOST_BASE = 190  # host k of a host-shaped cluster (several brokers each) -> .(190+k)
MAX_HOSTS = 9
IFNAMSIZ = 15  # Linux interface names are at most 15 characters
INSTALL_HINT = "install iproute2 and nftables (`make system-deps`) and run as root"


class NetworkError(RuntimeError):
    """An `ip`/`nft` command failed, or the tools are missing."""


def run(cmd: list[str], input_text: str | None = None, check: bool = True) -> str:
    """Run a command; on failure raise NetworkError quoting the command and its stderr."""
    if shutil.which(cmd[0]) is None:
        raise NetworkError(f"`{cmd[0]}` is not on PATH: {INSTALL_HINT}")
    result = subprocess.run(cmd, input=input_text, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NetworkError(
            f"`{' '.join(cmd)}` failed ({result.returncode}): {result.stderr.strip()}"
        )
    return result.stdout


def require_tools() -> None:
    """Fail early and clearly when the machine can't build namespaces or filter traffic."""
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            raise NetworkError(f"`{tool}` is not on PATH: {INSTALL_HINT}")


def cluster_tag(data_dir: Path | str) -> str:
    """4 hex digits derived from the (resolved) data dir: short enough for IFNAMSIZ."""
    return hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:4]


def node_host_number(node: str) -> int:
    """The last octet of a node's address: brokers "k" -> 10+k, ZooKeeper "zkk" -> 200+k,
    hosts "hostk" -> 190+k."""
    if node.startswith("zk") and node[2:].isdigit() and 1 <= int(node[2:]) <= 50:
        return ZK_HOST_BASE + int(node[2:])
    if node.startswith("host") and node[4:].isdigit() and 1 <= int(node[4:]) <= MAX_HOSTS:
        return HOST_BASE + int(node[4:])
    if node.isdigit() and 1 <= int(node) <= 180:
        return BROKER_HOST_BASE + int(node)
    raise ValueError(
        f"bad node name {node!r}: brokers are '1'..'180', ZooKeeper 'zk1'..'zk50', "
        f"hosts 'host1'..'host{MAX_HOSTS}'"
    )


def _used_subnets() -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for line in run(["ip", "-4", "route", "show", "table", "all"], check=False).splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local", "unreachable", "blackhole", "prohibit"):
            first = line.split()[1] if len(line.split()) > 1 else ""
        try:
            used.append(ipaddress.IPv4Network(first, strict=False))
        except ValueError:
            continue  # IPv6 or not an address
    return used


def pick_subnet(tag: str) -> ipaddress.IPv4Network:
    """10.231.<n>.0/24 with n derived from the tag, moving on while a route already
    covers it (another cluster's bridge, or the host's own networks)."""
    used = [net for net in _used_subnets() if net.prefixlen > 0]
    start = int(tag, 16) % 254 + 1
    for i in range(254):
        n = (start - 1 + i) % 254 + 1
        candidate = ipaddress.IPv4Network(f"{SUBNET_PREFIX}.{n}.0/24")
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise NetworkError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16")


@dataclass
class NetworkSpec:
    """Names and addresses of one cluster's network; JSON-serialisable for cluster.json."""

    tag: str
    subnet: str
    nodes: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"slb{self.tag}"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge_ip(self) -> str:
        return str(self.network.network_address + 1)

    def ip(self, node: str) -> str:
        return str(self.network.network_address + node_host_number(node))

    def netns(self, node: str) -> str:
        return f"sl{self.tag}-{node}"

    def host_veth(self, node: str) -> str:
        return _ifname(f"sl{self.tag}h{node}")

    def peer_veth(self, node: str) -> str:
        # Only lives in the root namespace for a moment before it moves and is renamed eth0.
        return _ifname(f"sl{self.tag}p{node}")

    def ips(self) -> dict[str, str]:
        return {node: self.ip(node) for node in self.nodes}

    def to_json(self) -> dict[str, object]:
        return {
            "tag": self.tag,
            "subnet": self.subnet,
            "bridge": self.bridge,
            "bridge_ip": self.bridge_ip,
            "nodes": {n: {"netns": self.netns(n), "ip": self.ip(n)} for n in self.nodes},
        }

    @classmethod
    def from_json(cls, state: dict[str, object]) -> NetworkSpec:
        nodes = state.get("nodes") or {}
        assert isinstance(nodes, dict)
        return cls(tag=str(state["tag"]), subnet=str(state["subnet"]), nodes=list(nodes))


def _ifname(name: str) -> str:
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name {name!r} is longer than {IFNAMSIZ} characters")
    return name


class ClusterNetwork:
    """Creates and removes the bridge, namespaces and veth pairs of one cluster."""

    def __init__(self, spec: NetworkSpec) -> None:
        self.spec = spec

    @classmethod
    def for_data_dir(cls, data_dir: Path | str, nodes: list[str]) -> ClusterNetwork:
        tag = cluster_tag(data_dir)
        for node in nodes:
            node_host_number(node)  # validate names before touching the system
        return cls(NetworkSpec(tag=tag, subnet=str(pick_subnet(tag)), nodes=list(nodes)))

    def exec_prefix(self, node: str) -> list[str]:
        """Prefix a command with this to run it inside the node's namespace."""
        return ["ip", "netns", "exec", self.spec.netns(node)]

    def setup(self) -> ClusterNetwork:
        """Build everything; on failure undo what was built and re-raise."""
        require_tools()
        # Leftovers from a crashed run with the same data dir would make `add` fail.
        self.teardown()
        spec = self.spec
        try:
            run(["ip", "link", "add", spec.bridge, "type", "bridge"])
            run(
                [
                    "ip",
                    "addr",
                    "add",
                    f"{spec.bridge_ip}/{spec.network.prefixlen}",
                    "dev",
                    spec.bridge,
                ]
            )
            run(["ip", "link", "set", spec.bridge, "up"])
            for node in spec.nodes:
                self._add_node(node)
        except BaseException:
            self.teardown()
            raise
        return self

    def _add_node(self, node: str) -> None:
        spec = self.spec
        ns, host, peer = spec.netns(node), spec.host_veth(node), spec.peer_veth(node)
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", host, "type", "veth", "peer", "name", peer])
        run(["ip", "link", "set", peer, "netns", ns])
        run(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
        run(
            [
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                f"{spec.ip(node)}/{spec.network.prefixlen}",
                "dev",
                "eth0",
            ]
        )
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        # Loopback: a process that talks to itself (e.g. a broker to its own listener
        # via 127.0.0.1) needs it, and it is down in a fresh namespace.
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "set", host, "master", spec.bridge])
        run(["ip", "link", "set", host, "up"])

    def teardown(self) -> None:
        """Remove namespaces, veths and the bridge; idempotent, ignores what's gone.

        Deleting a namespace destroys the veth end inside it, and with it the pair; the
        explicit host-side delete covers a pair whose peer never made it into the ns.
        """
        spec = self.spec
        existing = set(run(["ip", "netns", "list"], check=False).split())
        for node in spec.nodes:
            if spec.netns(node) in existing:
                run(["ip", "netns", "del", spec.netns(node)], check=False)
            for name in (spec.host_veth(node), spec.peer_veth(node)):
                if _link_exists(name):
                    run(["ip", "link", "del", name], check=False)
        if _link_exists(spec.bridge):
            run(["ip", "link", "del", spec.bridge], check=False)

    def exists(self) -> bool:
        return _link_exists(self.spec.bridge)


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()
