"""docs/deployment.md, run: every shell block of the guide, in order, on three "hosts".

A host is a network namespace with its own IP; `/etc/netns/<ns>/hosts` (which `ip netns
exec` mounts over /etc/hosts) lets the guide's names host1..host3 resolve inside every
namespace, and an `ssh` on PATH runs `ssh HOST CMD` inside HOST's namespace. The guide's
`${ETC:-/etc/strandline}`-style settings point into tmp_path. Each block is preceded by
`<!-- run: WHERE -->` (prelude, each-host, host1..host3) or `<!-- not run: why -->`;
an unmarked shell block fails the test, so nothing on the page goes unrun by accident.

Needs root, `ip`, java and Debian's zookeeper, kcat, curl; FAILS without them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from strandline.faults.netns import ClusterNetwork

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deployment.md"
VENV = Path(sys.executable).parent.parent
HOSTS = ["host1", "host2", "host3"]
SHELL_LANGS = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"<!-- (run|not run): ?(.*?) -->")
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    line: int
    kind: str  # "run" or "not run"
    where: str
    text: str


def guide_blocks(text: str) -> list[Block]:
    """Every shell block with its marker; an unmarked one is an error."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w*)", lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j] == "```")
        i = end + 1
        if fence.group(1) not in SHELL_LANGS:
            continue
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.fullmatch(previous.strip())
        assert marker, f"docs/deployment.md:{start + 1}: shell block without a run marker"
        blocks.append(
            Block(start + 1, marker.group(1), marker.group(2), "\n".join(lines[start + 1 : end]))
        )
    return blocks


def test_every_shell_block_is_marked() -> None:
    blocks = guide_blocks(GUIDE.read_text())
    not_run = [b for b in blocks if b.kind == "not run"]
    # Exactly these are left out: package installation, systemctl, ssh + systemctl.
    assert [b.text.split()[0] for b in not_run] == ["apt-get", "install", "strandline"]
    assert all(b.where for b in not_run), "a block that is not run must say why"
    assert {b.where for b in blocks if b.kind == "run"} <= {"prelude", "each-host", *HOSTS}
    assert sum(1 for b in blocks if b.where == "prelude") == 1


class Hosts:
    """Three namespaces named like the guide's hosts, and what runs in them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.network = ClusterNetwork.for_data_dir(root, HOSTS)
        self.shims = root / "bin"

    def ns(self, host: str) -> str:
        return self.network.spec.netns(host)

    def env(self, host: str) -> dict[str, str]:
        n = host.removeprefix("host")
        return {
            **os.environ,
            "PATH": f"{self.shims}:{os.environ['PATH']}",
            "N": n,
            "ETC": str(self.root / "etc"),
            "DATA": str(self.root / "data"),
            # One filesystem for all "hosts": ZooKeeper's paths, the same on every real
            # host, must differ here (myid, snapshots).
            "ZK_CONF": str(self.root / f"zk-{n}" / "conf"),
            "ZK_DATA": str(self.root / f"zk-{n}" / "data"),
            "SL_VENV": str(VENV),
            "COLUMNS": "200",
            "NO_COLOR": "1",
        }

    def setup(self) -> None:
        self.network.setup()
        names = "".join(f"{self.network.spec.ip(h)} {h}\n" for h in HOSTS)
        for host in HOSTS:
            etc = Path("/etc/netns") / self.ns(host)
            etc.mkdir(parents=True, exist_ok=True)
            # The machine's own name resolves to this host's address, as on a real host
            # (Spark looks its own name up).
            me = f"{self.network.spec.ip(host)} {socket.gethostname()}\n"
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{names}{me}")
        self.shims.mkdir()
        cases = "\n".join(f"  {h}) ns={self.ns(h)}; n={h.removeprefix('host')} ;;" for h in HOSTS)
        ssh = self.shims / "ssh"
        ssh.write_text(
            "#!/bin/bash\n"
            "# ssh HOST COMMAND...: COMMAND in HOST's namespace, with HOST's settings.\n"
            "host=$1; shift\ncase $host in\n"
            f'{cases}\n  *) echo "ssh: unknown host $host" >&2; exit 255 ;;\nesac\n'
            f'exec ip netns exec "$ns" env N=$n ZK_CONF={self.root}/zk-$n/conf '
            f'ZK_DATA={self.root}/zk-$n/data bash -c "$*"\n'
        )
        ssh.chmod(ssh.stat().st_mode | stat.S_IXUSR)

    def run(self, host: str, script: str) -> str:
        started = time.monotonic()
        done = subprocess.run(
            ["ip", "netns", "exec", self.ns(host), "bash", "-e", "-o", "pipefail", "-c", script],
            env=self.env(host),
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        took = time.monotonic() - started
        if done.returncode != 0:
            raise AssertionError(
                f"on {host} (exit {done.returncode} after {took:.1f}s):\n{script}\n"
                f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
            )
        print(f"[{host}, {took:.1f}s] {script.splitlines()[-1][:90]}")
        return done.stdout + done.stderr

    def teardown(self) -> None:
        # Everything the guide started runs inside our namespaces: end exactly those.
        for host in HOSTS:
            pids = subprocess.run(
                ["ip", "netns", "pids", self.ns(host)], capture_output=True, text=True
            ).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
        self.network.teardown()
        for host in HOSTS:
            shutil.rmtree(Path("/etc/netns") / self.ns(host), ignore_errors=True)


# The whole guide: an ensemble, six brokers, a six-broker roll, a Spark job (~4 min on
# two shared, busy cores).
@pytest.mark.timeout(1800)
def test_the_guide_runs_on_three_hosts(tmp_path: Path) -> None:
    missing = [t for t in ("ip", "java", "kcat", "curl") if shutil.which(t) is None]
    if missing or os.geteuid() != 0 or not Path("/usr/share/java/zookeeper.jar").exists():
        pytest.fail(
            f"needs root, Debian's zookeeper and {', '.join(missing) or 'ip, java, kcat, curl'}"
            " (`make setup`)",
            pytrace=False,
        )
    blocks = guide_blocks(GUIDE.read_text())
    [prelude] = [b.text for b in blocks if b.where == "prelude"]
    hosts = Hosts(tmp_path)
    outputs: list[tuple[Block, str]] = []
    try:
        hosts.setup()
        for block in blocks:
            if block.kind != "run" or block.where == "prelude":
                continue
            targets = HOSTS if block.where == "each-host" else [block.where]
            # An operator works on the hosts side by side (one terminal each).
            with ThreadPoolExecutor(len(targets)) as pool:
                script = f"{prelude}\n{block.text}"
                outs = pool.map(lambda h, s=script: hosts.run(h, s), targets)
                outputs.append((block, "".join(outs)))
    finally:
        logs = sorted((tmp_path / "data").glob("broker-*/logs/broker.out"))
        hosts.teardown()
    assert logs, "no broker ever started"

    def output_of(command: str) -> str:
        [found] = [out for block, out in outputs if command in block.text]
        return found

    # Every ensemble member reported a mode.
    modes = re.findall(r"Mode: (\w+)", output_of("/dev/tcp"))
    assert sorted(modes).count("leader") == 1 and len(modes) == 3, modes
    # Rack-aware placement: every partition on three hosts (brokers 2N-1, 2N on host N).
    rows = re.findall(
        r"Topic: orders\s+Partition: (\d+)\s+Leader: (\d+)\s+Replicas: ([\d,]+)",
        output_of("--describe"),
    )
    assert len(rows) == 6, output_of("--describe")
    for partition, _leader, replicas in rows:
        racks = {(int(r) + 1) // 2 for r in replicas.split(",")}
        assert racks == {1, 2, 3}, f"orders-{partition}: replicas {replicas} share a host"
    rolled = output_of("service restart")
    assert "rolled 6 brokers" in rolled, rolled
    assert rolled.index("restarting broker") < rolled.index("rolled 6 brokers")
    # The Spark job on the standalone cluster (a master on host1, a worker on each host)
    # read every record of orders and wrote each to orders-copy.
    copied = output_of("spark-submit")
    assert "copied 1000 records" in copied, copied[-3000:]
    assert re.search(r"^\s*1000$", copied, re.MULTILINE), copied[-3000:]
    scraped = output_of("curl")
    assert "kafka_server_replicamanager_underminisrpartitioncount 0.0" in scraped, scraped
