"""Kafka's internal topics (Topic.isInternal): written only by the broker itself.

A client may read them (with READ) but never produce to them nor delete their records,
whatever its ACLs: a forged record in `__consumer_offsets` is another group's commit, or
one the offsets loader cannot read. Kafka answers INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC

INTERNAL_TOPICS: frozenset[str] = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS
