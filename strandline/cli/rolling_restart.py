"""`strandline cluster rolling-restart`: restart brokers one at a time while clients
keep writing, as Kafka operators do for config changes and upgrades.

For each broker in turn: refuse (naming the partitions) if stopping it would leave a
partition with fewer in-sync replicas than its min.insync.replicas; restart it (SIGTERM
first, so the broker's controlled shutdown moves its leaderships away before its listener
closes); wait until it is registered again with a new broker epoch, back in the ISR of
every partition it replicates, and leading the partitions it is the preferred replica of
(asking for a preferred election when the controller has not given them back yet); only
then the next broker.

The checks (`restart_blockers`, `not_in_isr`, `preferred_elsewhere`) are pure functions of
the partition table read from ZooKeeper; the shell around them restarts processes and
polls ZooKeeper.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kazoo.handlers.threading import KazooTimeoutError
from kio.schema.errors import ErrorCode

from strandline.cli.admin import elect_leaders
from strandline.client.admin import AdminSettings, BlockingAdmin
from strandline.coordination import znodes
from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import (
    ClusterError,
    ClusterStatus,
    LocalCluster,
    read_cluster_status,
)
from strandline.types import PartitionInfo, TopicPartition

MIN_ISR_KEY = "min.insync.replicas"
PREFERRED_ELECTION = 0


class RollError(RuntimeError):
    """A broker may not be restarted now, or did not come back in time."""


# --- the pure checks -------------------------------------------------------------------


def restart_blockers(
    broker_id: int, partitions: Iterable[PartitionInfo], min_isr: Callable[[str], int]
) -> list[str]:
    """Why `broker_id` may not stop now: one line per partition whose ISR would drop below
    its topic's min.insync.replicas (acks=all writes there would fail), [] if none.

    A partition the broker is not in the ISR of loses nothing by the restart, so only
    partitions whose ISR holds it count."""
    reasons = []
    for p in partitions:
        if broker_id not in p.isr:
            continue
        remaining = [b for b in p.isr if b != broker_id]
        needed = min_isr(p.tp.topic)
        if len(remaining) < needed:
            reasons.append(
                f"{p.tp.topic}-{p.tp.partition}: ISR {p.isr} would shrink to {remaining}, "
                f"below min.insync.replicas={needed}"
            )
    return reasons


def not_in_isr(broker_id: int, partitions: Iterable[PartitionInfo]) -> list[TopicPartition]:
    """Partitions the broker replicates but is not yet back in the ISR of."""
    return [p.tp for p in partitions if broker_id in p.replicas and broker_id not in p.isr]


def preferred_elsewhere(
    broker_id: int, partitions: Iterable[PartitionInfo]
) -> list[TopicPartition]:
    """Partitions whose preferred (first) replica is the broker but that another leads."""
    return [p.tp for p in partitions if p.replicas[:1] == [broker_id] and p.leader != broker_id]


# --- restarting one broker -------------------------------------------------------------


class Restarter(Protocol):
    def restart(self, broker_id: int, host: str, port: int) -> None:
        """Stop the broker (SIGTERM: controlled shutdown) and start it again."""


class LocalRestarter:
    """Brokers of a `strandline cluster up` data dir."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def restart(self, broker_id: int, host: str, port: int) -> None:
        self.cluster.kill(broker_id, "TERM")
        self.cluster.start(broker_id)


class CommandRestarter:
    """Brokers on hosts: a shell command per broker, e.g.
    `ssh {host} systemctl restart strandline-broker@{id}`. {id}, {host} and {port} are
    replaced (shell-quoted) by the broker's id and registered address."""

    def __init__(self, template: str, timeout_s: float) -> None:
        self.template = template
        self.timeout_s = timeout_s

    def restart(self, broker_id: int, host: str, port: int) -> None:
        command = self.template.format(id=broker_id, host=shlex.quote(host), port=port)
        try:
            done = subprocess.run(
                command,
                shell=True,  # noqa: S602 - the operator's command line, as typed
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RollError(f"`{command}` did not finish within {self.timeout_s:g}s") from exc
        if done.returncode != 0:
            raise RollError(
                f"`{command}` exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-500:]}"
            )


# --- the roll ------------------------------------------------------------------------


@dataclass
class BrokerRoll:
    broker_id: int
    down_s: float  # restart command issued -> registered again
    back_s: float  # restart command issued -> in every ISR and leading its preferred partitions
    elections: int  # partitions given back by a preferred election we asked for


class Roller:
    def __init__(
        self,
        zk_connect: str,
        restarter: Restarter,
        default_min_isr: int,
        admin_settings: AdminSettings | None = None,
        timeout_s: float = 120.0,
        say: Callable[[str], None] = print,
    ) -> None:
        self.zk_connect = zk_connect
        self.restarter = restarter
        self.default_min_isr = default_min_isr
        self.admin_settings = admin_settings or AdminSettings("strandline-rolling-restart")
        self.timeout_s = timeout_s
        self.say = say

    def status(self) -> tuple[ClusterStatus, Callable[[str], int]]:
        """The partition table and each topic's effective min.insync.replicas."""
        with ZkClient(self.zk_connect, connect_timeout_s=10).connect() as zk:
            state = read_cluster_status(zk)
            dynamic = zk.get_broker_config(znodes.BROKER_CONFIG_DEFAULT).get(MIN_ISR_KEY)
            default = int(dynamic) if dynamic else self.default_min_isr
            topics = {p.tp.topic for p in state.partitions}
            overrides = {t: zk.get_topic_config(t).get(MIN_ISR_KEY) for t in topics}
        return state, lambda topic: int(overrides.get(topic) or default)

    def roll(self, brokers: list[int]) -> list[BrokerRoll]:
        done = []
        for broker_id in brokers:
            done.append(self.roll_one(broker_id))
        return done

    def roll_one(self, broker_id: int) -> BrokerRoll:
        state, min_isr = self.status()
        if broker_id not in state.live_brokers:
            raise RollError(
                f"broker {broker_id} is not registered in ZooKeeper (down?); start it before "
                "rolling it"
            )
        blockers = restart_blockers(broker_id, state.partitions, min_isr)
        if blockers:
            shown = "; ".join(blockers[:5]) + (
                f"; and {len(blockers) - 5} more" if len(blockers) > 5 else ""
            )
            raise RollError(
                f"not restarting broker {broker_id}: {len(blockers)} partition(s) would go "
                f"under min.insync.replicas: {shown}"
            )
        old_epoch = state.broker_epochs.get(broker_id)
        host, _, port = state.live_brokers[broker_id].rpartition(":")
        self.say(f"restarting broker {broker_id} ({host}:{port})")
        started = time.monotonic()
        self.restarter.restart(broker_id, host, int(port))
        self._wait(
            f"broker {broker_id} to register again",
            lambda s: broker_id in s.live_brokers and s.broker_epochs.get(broker_id) != old_epoch,
        )
        down_s = time.monotonic() - started
        self._wait(
            f"broker {broker_id} back in every ISR",
            lambda s: not not_in_isr(broker_id, s.partitions),
        )
        elections = self._give_back_leadership(broker_id)
        back_s = time.monotonic() - started
        self.say(
            f"broker {broker_id} back: registered after {down_s:.1f}s, in every ISR and "
            f"leading its preferred partitions after {back_s:.1f}s"
        )
        return BrokerRoll(broker_id, down_s, back_s, elections)

    def _give_back_leadership(self, broker_id: int) -> int:
        """Wait briefly for the controller's own rebalance; then ask for a preferred
        election of what is still led elsewhere and wait for it."""
        pending = preferred_elsewhere(broker_id, self.status()[0].partitions)
        if not pending:
            return 0
        bootstrap = ",".join(self.status()[0].live_brokers.values())
        with BlockingAdmin(bootstrap, self.admin_settings) as admin:
            results = elect_leaders(admin, PREFERRED_ELECTION, pending)
        failed = {
            tp: code
            for tp, (code, _msg) in results.items()
            if code not in (ErrorCode.none, ErrorCode.election_not_needed)
        }
        if failed:
            self.say(f"preferred election did not move everything yet: {failed}; waiting")
        self._wait(
            f"broker {broker_id} leading its preferred partitions again",
            lambda s: not preferred_elsewhere(broker_id, s.partitions),
        )
        return len(pending)

    def _wait(self, what: str, done: Callable[[ClusterStatus], bool]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if done(self.status()[0]):
                    return
            except (ClusterError, KazooTimeoutError, OSError):
                pass  # ZooKeeper busy or between leaders: try again
            if time.monotonic() > deadline:
                raise RollError(f"timed out after {self.timeout_s:g}s waiting for {what}")
            time.sleep(0.2)


def broker_order(live: Mapping[int, str], controller: int | None) -> list[int]:
    """Every broker by id, the controller last: it moves only once, as Kafka operators
    (and Strimzi) roll it."""
    ordered = sorted(live)
    if controller in live:
        ordered.remove(controller)  # type: ignore[arg-type]
        ordered.append(controller)  # type: ignore[arg-type]
    return ordered
