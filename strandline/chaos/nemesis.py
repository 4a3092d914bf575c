"""The nemesis: a fault schedule drawn from a seed, and the hands that apply it.

`plan_schedule` is pure: the same seed, length and fault kinds give the same faults at
the same offsets, so a run that found an anomaly can be replayed (`chaos run --seed S`).
Faults come one after another, never overlapping: with rf=3 and min.insync.replicas=2 a
single fault must cost no acknowledged write, and keeping them apart lets the checker
charge each unavailability window to one fault kind. `Nemesis` applies a step to a
`LocalCluster` and reverts it, naming what it resolved at run time (which broker led,
which ZooKeeper server led) in the history.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from strandline.launcher.local_cluster import LocalCluster

# Every fault kind the nemesis knows, in the order `explore` rotates through them.
FAULT_KINDS: tuple[str, ...] = (
    "kill",
    "pause",
    "partition",
    "isolate",
    "one-way",
    "zk-isolate",
    "zk-kill",
    "session-expiry",
    "disk-full",
    "zk-blip",
)
# Kinds that need every node in its own network namespace.
NETWORK_KINDS = frozenset({"partition", "isolate", "one-way", "zk-isolate", "zk-blip"})
# Kinds aimed at one broker (`{"broker": ...}` targets).
BROKER_KINDS = frozenset(
    {"kill", "pause", "isolate", "zk-isolate", "session-expiry", "disk-full", "zk-blip"}
)
WARMUP_S = 3.0
COOLDOWN_S = 3.0
MIN_FAULT_S, MAX_FAULT_S = 3.0, 7.0
MIN_GAP_S, MAX_GAP_S = 1.5, 3.5
# A zk-blip cut lasts this share of the session timeout: kazoo's read timeout is 2/3 of
# it, so the longer cuts make the connection drop (ConnectionLoss), and the shorter only
# delay the requests; none lets the session expire.
BLIP_MIN_FRACTION, BLIP_MAX_FRACTION = 0.3, 0.6
ZK_BLIP_MIN_S = 4.5


@dataclass(frozen=True)
class FaultStep:
    fault_id: int
    kind: str
    start_s: float
    duration_s: float
    # What to hit: {"broker": 2}, {"broker": "leader"} (resolved when applied),
    # {"groups": [...]}, {"src": "1", "dst": "2"}, {"zk": 1 | "leader"}.
    target: dict[str, Any] = field(default_factory=dict)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def to_json(self) -> dict[str, Any]:
        return {
            "fault_id": self.fault_id,
            "kind": self.kind,
            "start_s": round(self.start_s, 3),
            "duration_s": round(self.duration_s, 3),
            "target": self.target,
        }


def zk_blip_target(
    rng: random.Random, duration_s: float, session_timeout_s: float
) -> dict[str, Any]:
    """zk-blip: partition 0's leader loses ZooKeeper for short cuts, each under
    `BLIP_MAX_FRACTION` of the session timeout with a reconnect gap after it (the session
    survives: ConnectionLoss, not expiry), while one follower is cut from the leader long
    enough for the leader to drop it from the ISR and, once the link is back, take it
    back: the ISR writes (and their lost replies) happen inside the cuts. (Stopping the
    follower instead would end its session, 2 s, as fast as it leaves the ISR: the
    controller, not the leader, would shrink the ISR.) `blips` are (start, length) in
    seconds from the fault's start."""
    blips: list[list[float]] = []
    # The follower cut off at 0 is behind replica.lag.time.max.ms (2 s in chaos runs)
    # from about 2 s on, and the leader's next check (every second) shrinks the ISR:
    # the first cut starts around then.
    at = rng.uniform(1.5, 2.2)
    while True:
        length = rng.uniform(BLIP_MIN_FRACTION, BLIP_MAX_FRACTION) * session_timeout_s
        if at + length > duration_s:
            break
        blips.append([round(at, 3), round(length, 3)])
        at += length + rng.uniform(0.6, 1.0) * session_timeout_s
    follower_pause_s = round(min(duration_s - 0.5, rng.uniform(2.5, 3.5)), 3)
    return {
        "broker": "leader",
        "follower": "follower-1",
        "follower_pause_s": follower_pause_s,
        "blips": blips,
    }


def _target(rng: random.Random, kind: str, brokers: int, zk_nodes: int) -> dict[str, Any]:
    broker_ids = list(range(1, brokers + 1))
    # Half the time the victim is whoever leads the first partition then: faults on a
    # leader are the ones Kafka's data-loss scenarios are about.
    victim: int | str = "leader" if rng.random() < 0.5 else rng.choice(broker_ids)
    if kind == "partition":
        nodes = [str(b) for b in broker_ids] + [f"zk{n}" for n in range(1, zk_nodes + 1)]
        rng.shuffle(nodes)
        cut = rng.randint(1, len(nodes) - 1)
        return {"groups": [sorted(nodes[:cut]), sorted(nodes[cut:])]}
    if kind == "one-way":
        src, dst = rng.sample(broker_ids, 2)
        return {"src": str(src), "dst": str(dst)}
    if kind == "zk-kill":
        return {"zk": "leader" if rng.random() < 0.5 else rng.randint(1, zk_nodes)}
    return {"broker": victim}


def plan_schedule(
    seed: int,
    seconds: float,
    kinds: list[str] | tuple[str, ...],
    *,
    brokers: int = 3,
    zk_nodes: int = 3,
    min_faults: int = 3,
    first_kind: str | None = None,
    session_timeout_s: float = 2.0,
) -> list[FaultStep]:
    """Faults one after another from WARMUP_S to `seconds - COOLDOWN_S`.

    `first_kind` forces the first fault's kind (explore uses it so every kind is drawn).
    If fewer than `min_faults` would fit, durations and gaps shrink to make room.
    """
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; known: {', '.join(FAULT_KINDS)}")
    if not kinds:
        raise ValueError("no fault kinds to draw from")
    rng = random.Random(seed)
    budget = seconds - WARMUP_S - COOLDOWN_S
    # Session expiry lasts as long as the session timeout, plus a margin to be sure.
    expiry_s = session_timeout_s + 1.5
    scale = 1.0
    steps: list[FaultStep] = []
    for _ in range(20):
        steps = []
        at = WARMUP_S
        draw = random.Random(rng.random())
        while True:
            kind = first_kind if not steps and first_kind else draw.choice(list(kinds))
            duration = (
                expiry_s
                if kind == "session-expiry"
                else draw.uniform(MIN_FAULT_S, MAX_FAULT_S) * scale
            )
            if kind == "zk-blip":
                # Room for the follower's pause, a shrink and an expansion.
                duration = max(duration, ZK_BLIP_MIN_S)
            if at + duration > WARMUP_S + budget:
                break
            target = (
                zk_blip_target(draw, duration, session_timeout_s)
                if kind == "zk-blip"
                else _target(draw, kind, brokers, zk_nodes)
            )
            steps.append(FaultStep(len(steps) + 1, kind, at, duration, target))
            at += duration + draw.uniform(MIN_GAP_S, MAX_GAP_S) * scale
        if len(steps) >= min_faults:
            break
        scale *= 0.8
    return steps


class Nemesis:
    """Applies and reverts `FaultStep`s on a running `LocalCluster`."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self._undo: dict[int, dict[str, Any]] = {}

    def _replicas(self) -> tuple[int, list[int]]:
        """Partition 0's leader and its other replicas, as ZooKeeper says now."""
        for p in self.cluster.status(timeout_s=5).partitions:
            if p.tp.topic == self.topic and p.tp.partition == 0:
                leader = p.leader if p.leader is not None and p.leader > 0 else p.replicas[0]
                return leader, [r for r in p.replicas if r != leader]
        return 1, []

    def _broker(self, step: FaultStep) -> int:
        """`{"broker": n}`, or "leader" / "follower-1" / "follower-2" of partition 0."""
        broker = step.target.get("broker", 1)
        if broker == "leader":
            return self._replicas()[0]
        if isinstance(broker, str) and broker.startswith("follower-"):
            return self._replicas()[1][int(broker.removeprefix("follower-")) - 1]
        return int(broker)

    def apply(self, step: FaultStep) -> dict[str, Any]:
        """Start the fault; returns what it resolved (written to the history)."""
        kind = step.kind
        detail: dict[str, Any] = {"target": step.target}
        broker = 0  # only the kinds aimed at one broker name one
        if kind in BROKER_KINDS:
            broker = detail["broker"] = self._broker(step)
        if kind == "kill":
            self.cluster.kill(broker, "KILL")
        elif kind == "pause":
            self.cluster.kill(broker, "STOP")
        elif kind == "partition":
            self.cluster.partition(step.target["groups"])
        elif kind == "isolate":
            self.cluster.isolate(str(broker))
        elif kind == "one-way":
            self.cluster.one_way(step.target["src"], step.target["dst"])
        elif kind == "zk-isolate":
            self.cluster.from_zookeeper(broker)
        elif kind == "zk-kill":
            wanted = step.target.get("zk", 1)
            server = (self.cluster.zk_leader() or 1) if wanted == "leader" else int(wanted)
            detail["zk"] = server
            self.cluster.zk_kill(server)
        elif kind == "session-expiry":
            # Blocking for the session timeout: the fault *is* the expiry.
            started = time.monotonic()
            self.cluster.expire_session(broker)
            detail["took_s"] = round(time.monotonic() - started, 3)
        elif kind == "disk-full":
            detail["filled_bytes"] = self.cluster.fill_disk(broker)
        elif kind == "zk-blip":
            detail.update(self._zk_blips(step, broker))
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        self._undo[step.fault_id] = detail
        return detail

    def _zk_blips(self, step: FaultStep, broker: int) -> dict[str, Any]:
        """Blocks for the blips (the fault *is* its cuts): cut a follower of partition 0
        from `broker`, cut `broker` from ZooKeeper for each blip, restore the follower's
        link when its pause is over. Returns what was done: each action with the seconds (from the
        follower's cut) before and after it took effect, and each cut's real length."""
        target = step.target
        followers = self._replicas()[1]
        wanted = target.get("follower", "follower-1")
        index = int(str(wanted).removeprefix("follower-")) - 1 if followers else -1
        follower = followers[index] if 0 <= index < len(followers) else None
        if follower == broker:
            follower = None
        pause_s = float(target.get("follower_pause_s", 0))
        self._undo[step.fault_id] = {"broker": broker, "follower": follower}
        done: list[list[Any]] = []
        cuts: list[float] = []
        started = time.monotonic()

        def at() -> float:
            return round(time.monotonic() - started, 3)

        def cut_follower(cut: bool) -> None:
            if follower is not None:
                before = at()
                self.cluster.cut_link_fast(follower, broker, cut)
                done.append(["follower-cut" if cut else "follower-back", before, at()])

        resumed = follower is None or pause_s <= 0
        if not resumed:
            cut_follower(True)
        for blip_at, length in target.get("blips", []):
            if not resumed and started + pause_s <= started + float(blip_at):
                time.sleep(max(0.0, started + pause_s - time.monotonic()))
                cut_follower(False)
                resumed = True
            time.sleep(max(0.0, started + float(blip_at) - time.monotonic()))
            before = at()
            self.cluster.blip_from_zookeeper(broker, True)
            cut_at = time.monotonic()
            done.append(["cut", before, at()])
            # The follower's pause may end inside this cut: its ISR expansion is then
            # written while the leader is cut off.
            resume = started + pause_s
            if not resumed and cut_at < resume < cut_at + float(length):
                time.sleep(max(0.0, resume - time.monotonic()))
                cut_follower(False)
                resumed = True
            time.sleep(max(0.0, cut_at + float(length) - time.monotonic()))
            before = at()
            self.cluster.blip_from_zookeeper(broker, False)
            done.append(["restore", before, at()])
            cuts.append(round(time.monotonic() - cut_at, 3))
        if not resumed:
            time.sleep(max(0.0, started + pause_s - time.monotonic()))
            cut_follower(False)
        return {"follower": follower, "done": done, "cuts_s": cuts}

    def revert(self, step: FaultStep) -> None:
        detail = self._undo.pop(step.fault_id, {})
        broker = int(detail.get("broker", 0))
        if step.kind == "kill":
            self.cluster.start(broker)
        elif step.kind == "pause":
            self.cluster.kill(broker, "CONT")
        elif step.kind in ("partition", "isolate", "one-way", "zk-isolate"):
            self.cluster.heal()
        elif step.kind == "zk-blip":
            self.cluster.heal()
        elif step.kind == "zk-kill":
            self.cluster.zk_start(int(detail["zk"]))
        elif step.kind == "disk-full":
            self.cluster.free_disk(broker)

    def revert_all(self, steps: list[FaultStep]) -> None:
        """Undo whatever is still applied (an interrupted run heals before it checks)."""
        for step in steps:
            if step.fault_id in self._undo:
                self.revert(step)
