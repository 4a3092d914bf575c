"""Topic ids (KIP-516): what they look like in text and how new ones are drawn.

Kafka's `Uuid` prints as the URL-safe base64 of its 16 bytes without padding
(22 characters); that text is what the topic znode's `topic_id` field and the
`partition.metadata` file hold. The zero UUID means "no id" on the wire.
"""

from __future__ import annotations

import base64
import binascii
import uuid

ZERO_TOPIC_ID = uuid.UUID(int=0)
# Kafka's Uuid.RESERVED: never handed out as a topic id (ONE_UUID is KRaft's
# metadata topic).
RESERVED_TOPIC_IDS = frozenset({ZERO_TOPIC_ID, uuid.UUID(int=1)})


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    """Parse Kafka's base64 form; ValueError with the text on anything else."""
    if len(text) > 24:
        raise ValueError(f"topic id {text!r} is too long to be a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"topic id {text!r} is not base64: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} decodes to {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw)


def is_valid_new_topic_id(topic_id: uuid.UUID) -> bool:
    """Kafka's Uuid.randomUuid rules: not reserved, and its text does not start with
    '-' (it would read as an option on a command line)."""
    return topic_id not in RESERVED_TOPIC_IDS and not topic_id_to_str(topic_id).startswith("-")


def random_topic_id() -> uuid.UUID:
    """A fresh random id (the I/O shells call this; the pure core never does)."""
    while True:
        candidate = uuid.uuid4()
        if is_valid_new_topic_id(candidate):
            return candidate
