"""KIP-227 incremental fetch sessions, fetcher side (Kafka's FetchSessionHandler).

The fetcher says what it wants of each partition now; the handler turns that into the
next request: a full one (opening a session) when it has none, else an incremental one
naming only the partitions whose position changed since the leader last heard of them,
and forgetting those it no longer wants. The leader then answers only the partitions
with news. No I/O here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strandline.protocol.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    PartitionPosition,
    next_epoch,
)
from strandline.types import TopicPartition


@dataclass(frozen=True)
class FetchPlan:
    """The session fields and partitions of one Fetch request."""

    session_id: int
    epoch: int
    full: bool
    to_send: dict[TopicPartition, PartitionPosition]
    forgotten: list[TopicPartition]


class FetchSessionHandler:
    def __init__(self, use_sessions: bool = True) -> None:
        self.use_sessions = use_sessions
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds for us, as last sent.
        self._sent: dict[TopicPartition, PartitionPosition] = {}

    def plan(
        self,
        wanted: dict[TopicPartition, PartitionPosition],
        changed: Collection[TopicPartition] | None = None,
    ) -> FetchPlan:
        """The next request for `wanted`. `changed`: the only partitions whose position
        may differ from the last plan (None: compare them all)."""
        if self.session_id == INVALID_SESSION_ID:
            epoch = INITIAL_EPOCH if self.use_sessions else FINAL_EPOCH
            return FetchPlan(INVALID_SESSION_ID, epoch, True, dict(wanted), [])
        sent = self._sent
        if changed is None:
            changed = wanted.keys() | sent.keys()
        to_send = {
            tp: p for tp in changed if (p := wanted.get(tp)) is not None and sent.get(tp) != p
        }
        forgotten = [tp for tp in changed if tp in sent and tp not in wanted]
        return FetchPlan(self.session_id, self.epoch, False, to_send, forgotten)

    def on_response(self, plan: FetchPlan, error: ErrorCode, session_id: int) -> None:
        """The leader answered `plan` (top-level `error`, its `session_id`)."""
        if error != ErrorCode.none:
            # FETCH_SESSION_ID_NOT_FOUND (evicted, leader restarted),
            # INVALID_FETCH_SESSION_EPOCH (a lost response): start over with a full fetch.
            self.reset()
            return
        if plan.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH)
            self._sent = dict(plan.to_send) if session_id != INVALID_SESSION_ID else {}
            return
        self.epoch = next_epoch(plan.epoch)
        self._sent.update(plan.to_send)
        for tp in plan.forgotten:
            self._sent.pop(tp, None)

    def position(self, tp: TopicPartition) -> PartitionPosition | None:
        """Our position in `tp` as the leader's session holds it."""
        return self._sent.get(tp)

    def on_failure(self) -> None:
        """No answer (timeout, connection lost): the leader may or may not have applied
        the request, so the session's state is unknown."""
        self.reset()

    def reset(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent = {}
