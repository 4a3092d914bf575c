"""Kafka's replication quotas (KIP-73): a reassignment's catch-up traffic held to a rate,
so moving a big partition does not starve the brokers' clients.

Two settings per broker, `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (bytes/s), and two per topic naming which
replicas they apply to, `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas` ("partition:broker,...", or "*" for all).
A leader throttles only followers outside the ISR: replication the ISR needs (and so
acks=all) is never slowed. Pure: every call takes `now` in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED = 9223372036854775807  # Kafka's default rate: Long.MAX_VALUE


class QuotaConfigError(ValueError):
    """A throttled-replicas list that is not "*" or "partition:broker,..."."""


@dataclass
class ReplicationQuota:
    """A token bucket holding at most one second of traffic. A fetch may overdraw it
    (a batch is never split), after which the partition waits until the debt is paid:
    over a reassignment the rate is the configured one, whatever the batch sizes."""

    rate: float = float(UNLIMITED)
    burst_s: float = 1.0
    _tokens: float = field(default=0.0, repr=False)
    _last: float | None = field(default=None, repr=False)

    @property
    def limited(self) -> bool:
        return self.rate < UNLIMITED

    def set_rate(self, rate: float, now: float) -> None:
        self._refill(now)
        self.rate = rate
        self._tokens = min(self._tokens, rate * self.burst_s)

    def _refill(self, now: float) -> None:
        if self._last is None:
            self._tokens = self.rate * self.burst_s
        else:
            self._tokens = min(
                self.rate * self.burst_s, self._tokens + (now - self._last) * self.rate
            )
        self._last = now

    def exceeded(self, now: float) -> bool:
        if not self.limited:
            return False
        self._refill(now)
        return self._tokens <= 0

    def record(self, size: int, now: float) -> None:
        if self.limited:
            self._refill(now)
            self._tokens -= size

    def delay_s(self, now: float) -> float:
        """How long until a throttled partition may be sent again (0: now)."""
        if not self.exceeded(now):
            return 0.0
        return -self._tokens / self.rate + 1e-3


@dataclass(frozen=True)
class ThrottledReplicas:
    every: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()  # (partition, broker)

    def throttles(self, partition: int, broker: int) -> bool:
        return self.every or (partition, broker) in self.replicas


@cache
def parse_throttled_replicas(text: str) -> ThrottledReplicas:
    """Kafka's list syntax: "" (none), "*" (all), or "0:101,0:102,1:102"."""
    text = text.strip()
    if text == "*":
        return ThrottledReplicas(every=True)
    pairs: set[tuple[int, int]] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise QuotaConfigError(
                f"{item!r}: throttled replicas are '*' or a list of partition:broker"
            )
        pairs.add((int(partition), int(broker)))
    return ThrottledReplicas(replicas=frozenset(pairs))


def render_throttled_replicas(replicas: set[tuple[int, int]]) -> str:
    return ",".join(f"{p}:{b}" for p, b in sorted(replicas))


def reassignment_throttles(
    current: Mapping[tuple[str, int], Sequence[int]],
    target: Mapping[tuple[str, int], Sequence[int]],
) -> tuple[dict[str, dict[str, str]], set[int]]:
    """What kafka-reassign-partitions.sh --throttle sets for moving `current` to `target`
    ((topic, partition) -> replicas): per topic, the leader side throttles the existing
    replicas (any of them may lead while the new ones catch up) and the follower side the
    added ones; the rates go on every broker taking part. Partitions whose replicas do
    not change are left alone."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for (topic, partition), replicas in sorted(target.items()):
        existing = list(current.get((topic, partition), ()))
        if list(replicas) == existing:
            continue
        added = [b for b in replicas if b not in existing]
        leader.setdefault(topic, set()).update((partition, b) for b in existing)
        follower.setdefault(topic, set()).update((partition, b) for b in added)
        brokers.update(existing, replicas)
    configs = {
        topic: {
            LEADER_REPLICAS: render_throttled_replicas(leader.get(topic, set())),
            FOLLOWER_REPLICAS: render_throttled_replicas(follower.get(topic, set())),
        }
        for topic in sorted(set(leader) | set(follower))
    }
    return configs, brokers
