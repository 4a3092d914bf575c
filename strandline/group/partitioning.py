"""Which `__consumer_offsets` partition holds a group: Kafka's `partitionFor`."""

from __future__ import annotations

import functools

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2**31)


@functools.lru_cache(maxsize=65_536)  # called for every group request
def java_string_hash(text: str) -> int:
    """`java.lang.String.hashCode()`: 31-polynomial over UTF-16 code units, int32 overflow."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """`org.apache.kafka.common.utils.Utils.abs`: Integer.MIN_VALUE maps to 0, not to itself."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition of `group_id`, identical to Kafka's so clusters agree."""
    if num_partitions <= 0:
        raise ValueError("offsets.topic.num.partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
