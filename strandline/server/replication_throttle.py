"""The broker's replication throttle (KIP-73): its two quotas, their rates from the
broker configs, and which replicas they hold back, from the topics' configs.

Leader side (the Fetch handler): a throttled replica of a partition led here, fetched by
a follower outside the ISR, is left out of the answer while the leader quota is spent.
Follower side (the replica fetcher): a throttled replica here is left out of the fetch
while the follower quota is spent. In-sync followers are never held back, so acks=all
and the HW never wait for a throttle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from strandline.quotas import (
    FOLLOWER_RATE,
    LEADER_RATE,
    UNLIMITED,
    ReplicationQuota,
    parse_throttled_replicas,
)
from strandline.server.clock import monotonic_s
from strandline.storage.config import LogConfig
from strandline.types import TopicPartition


class ReplicationThrottle:
    def __init__(
        self,
        broker_id: int,
        log_config_for: Callable[[str], LogConfig],
        clock: Callable[[], float] = monotonic_s,
    ) -> None:
        self.broker_id = broker_id
        self.log_config_for = log_config_for
        self.clock = clock
        self.leader = ReplicationQuota()
        self.follower = ReplicationQuota()

    def set_rates(self, effective_configs: Mapping[str, str]) -> None:
        """From the broker's effective configs (static + dynamic); absent = unlimited."""
        now = self.clock()
        for quota, key in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            quota.set_rate(float(effective_configs.get(key, UNLIMITED)), now)

    def leader_throttles(self, tp: TopicPartition, isr: tuple[int, ...], follower: int) -> bool:
        if not self.leader.limited or follower in isr:
            return False
        listed = self.log_config_for(tp.topic).leader_replication_throttled_replicas
        return bool(listed) and parse_throttled_replicas(listed).throttles(
            tp.partition, self.broker_id
        )

    def follower_throttles(self, tp: TopicPartition) -> bool:
        if not self.follower.limited:
            return False
        listed = self.log_config_for(tp.topic).follower_replication_throttled_replicas
        return bool(listed) and parse_throttled_replicas(listed).throttles(
            tp.partition, self.broker_id
        )
