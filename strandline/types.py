"""Small value types shared by every layer."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition's directory name inside a log dir, as Kafka names it."""
        return f"{self.topic}-{self.partition}"


# Kafka's sentinels.
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
NO_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
# Kafka's DebuggingConsumerId: may read any replica, leader or not, up to its own HW
# (kafka-replica-verification.sh fetches every replica this way).
DEBUGGING_REPLICA_ID = -2
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # ListOffsets v7+ (KIP-734): the record with the largest timestamp
LATEST_TIMESTAMP = -1
