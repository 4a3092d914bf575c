"""The chaos harness against a real cluster: every fault kind once with safe settings
(nothing lost), and deliberately unsafe settings that the checker must catch.

These are CI's bounded subset of `strandline chaos explore`: each starts its own
3-broker cluster with a 3-server ZooKeeper ensemble, every node in its own network
namespace, and needs root, `ip` and `nft` (installed by `make setup`).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from strandline.chaos.nemesis import FAULT_KINDS, FaultStep, zk_blip_target
from strandline.chaos.runner import ChaosConfig, run_schedule


@pytest.fixture(autouse=True)
def _needs_network_tools() -> None:
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"chaos tests need {', '.join(missing)} (Debian iproute2 and nftables): "
            "run `make setup`",
            pytrace=False,
        )


def steps(*faults: tuple[str, float, float, dict[str, object]]) -> list[FaultStep]:
    return [
        FaultStep(i + 1, kind, start, duration, dict(target))
        for i, (kind, start, duration, target) in enumerate(faults)
    ]


def test_every_fault_kind_once_loses_nothing(tmp_path: Path) -> None:
    """acks=all, rf=3, min.insync.replicas=2: one fault of each kind, one after another."""
    plan = []
    at = 3.0
    for kind in FAULT_KINDS:
        # The session expiry blocks until the session is gone: on a loaded machine that
        # took longer than 3.5 s, the faults after it started late, and disk-full (next)
        # was reverted as soon as it was applied.
        duration = 3.5 if kind != "session-expiry" else 6.0
        target: dict[str, object] = {"broker": "leader"}
        if kind == "partition":
            target = {"groups": [["1", "zk1"], ["2", "3", "zk2", "zk3"]]}
        elif kind == "one-way":
            target = {"src": "1", "dst": "2"}
        elif kind == "zk-kill":
            target = {"zk": "leader"}
        elif kind == "zk-blip":
            # Partition 0's leader cut from ZooKeeper twice for about a second (session
            # timeout 2 s) while a follower is cut from it for 2.5 s.
            duration = 6.0
            target = zk_blip_target(random.Random(3), duration, 2.0)
        plan.append((kind, at, duration, target))
        at += duration + 1.5
    config = ChaosConfig(seed=7, out_dir=tmp_path, seconds=at + 3, plan=steps(*plan), rate_per_s=60)
    result = run_schedule(config)
    check = result.check
    summary = json.dumps(check.to_json(), indent=1)[:3000]
    assert check.ok, summary
    assert check.acked > 1000, summary
    assert check.lost == 0 and check.diverged == 0, summary
    # Every kind was applied and measured.
    assert set(check.unavailability) == set(FAULT_KINDS), summary
    assert (result.folder / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in result.folder.glob("state-change-broker-*.log")) == [
        f"state-change-broker-{b}.log" for b in (1, 2, 3)
    ]
    history = (result.folder / "history.jsonl").read_text()
    assert '"f":"final-read"' in history and '"f":"replica-compare"' in history
    # The disk-full fault reached the broker: it said so in its state-change log.
    logs = "".join(p.read_text() for p in result.folder.glob("state-change-broker-*.log"))
    assert "log-dir-full" in logs
    # The zk-blip cut its broker off from ZooKeeper while a follower was cut from it and
    # let back.
    blip = [
        json.loads(line)
        for line in history.splitlines()
        if '"f":"fault-applied"' in line and '"fault":"zk-blip"' in line
    ]
    assert len(blip) == 1 and "error" not in blip[0]["detail"], blip
    done = [entry[0] for entry in blip[0]["detail"]["done"]]
    assert done.count("cut") == 2 and "follower-cut" in done and "follower-back" in done, blip
    # Each cut, from the nft transaction that made it to the one that ended it, stayed
    # under the 2 s session timeout.
    assert all(0 < cut < 2.0 for cut in blip[0]["detail"]["cuts_s"]), blip


def test_checker_catches_acks1_loss_when_the_leader_is_partitioned_away(
    tmp_path: Path,
) -> None:
    """Documented Kafka behaviour: with acks=1 a leader cut off from the other brokers and
    ZooKeeper (but not from its clients) acknowledges writes that the new leader never
    gets; when it returns it truncates them. The checker must report them lost."""
    config = ChaosConfig(
        seed=11,
        out_dir=tmp_path,
        seconds=16,
        acks="1",
        idempotent_producers=0,
        plain_producers=2,
        rate_per_s=150,
        plan=steps(("isolate", 3.0, 8.0, {"broker": "leader"})),
    )
    check = run_schedule(config).check
    assert not check.ok
    assert check.lost > 0, json.dumps(check.to_json())[:2000]
    assert any(a.kind == "lost" and a.seed == 11 for a in check.anomalies)


def test_checker_catches_unclean_election_loss(tmp_path: Path) -> None:
    """min.insync.replicas=1 and unclean election: the followers are paused until they
    leave the ISR, the lone leader acknowledges acks=all writes, then dies; the returning
    followers elect one of themselves uncleanly. The loss is reported and the election
    is in the state-change log."""
    config = ChaosConfig(
        seed=12,
        out_dir=tmp_path,
        seconds=24,
        min_insync_replicas=1,
        unclean_leader_election=True,
        idempotent_producers=0,
        plain_producers=2,
        rate_per_s=150,
        plan=steps(
            ("pause", 2.0, 9.0, {"broker": "follower-1"}),
            ("pause", 2.0, 9.0, {"broker": "follower-2"}),
            ("kill", 8.0, 10.0, {"broker": "leader"}),
        ),
    )
    result = run_schedule(config)
    check = result.check
    assert check.lost > 0, json.dumps(check.to_json())[:2000]
    logs = "".join(p.read_text() for p in result.folder.glob("state-change-broker-*.log"))
    assert "unclean-leader-election" in logs


def test_the_history_names_the_writer_of_every_idempotent_record(tmp_path: Path) -> None:
    """After the final read the runner records, from the segment files, the producer id,
    epoch and base sequence of each idempotent batch below the HW: what lets the checker
    tell a client's resend under a bumped epoch from a duplicate the broker let through."""
    config = ChaosConfig(seed=13, out_dir=tmp_path, seconds=5, plan=[], rate_per_s=60)
    result = run_schedule(config)
    assert result.check.ok, json.dumps(result.check.to_json())[:2000]
    ops = [json.loads(line) for line in (result.folder / "history.jsonl").open()]
    named = {op["partition"]: op["batches"] for op in ops if op["f"] == "producer-batches"}
    assert sorted(named) == list(range(config.partitions))
    covered = {
        (partition, offset)
        for partition, batches in named.items()
        for first, last, producer_id, producer_epoch, _seq in batches
        if producer_id >= 0 and producer_epoch >= 0
        for offset in range(first, last + 1)
    }
    sent = {op["value"]: op for op in ops if op["f"] == "send"}
    idempotent_reads = [
        (op["partition"], op["offset"])
        for op in ops
        if op["f"] == "final-read" and sent.get(op["value"], {}).get("idempotent")
    ]
    assert len(idempotent_reads) > 100
    assert all(read in covered for read in idempotent_reads)
    plain_reads = [
        (op["partition"], op["offset"])
        for op in ops
        if op["f"] == "final-read" and not sent.get(op["value"], {}).get("idempotent", True)
    ]
    assert plain_reads and not any(read in covered for read in plain_reads)
