"""KIP-227 incremental fetch sessions, leader side (Kafka's FetchSessionCache).

A fetcher that names thousands of partitions need not name them again in every request:
its first (full) fetch opens a session that caches, per partition, the fetch position and
what the last response said (HW, LSO, log start). Later fetches carry only the partitions
whose position changed, and responses only the partitions with something new: records, a
moved HW/LSO/log start, or an error. An idle partition then costs nothing per fetch.

The cache also knows which sessions hold a partition, so an append or HW move marks that
partition dirty in just those sessions and wakes their parked fetches: a fetch reads the
partitions its request named plus the dirty ones, never the whole session.

No I/O here: the fetch handler asks `open_fetch` for a `SessionFetch`, reads what it says,
and reports back with `SessionFetch.respond`.

Sessions are guarded (docs/security.md): ids are random, not sequential, so one cannot be guessed;
each session has an owner (the principal and host of the connection that opened it), and
only its owner may use it or close it with a full fetch. Anyone else naming it is told
FETCH_SESSION_ID_NOT_FOUND on an incremental fetch, and on a full fetch gets a new
session of its own while the named one stays. The handler authorizes before it calls
`open_fetch`, so a refused fetch never creates a session.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strandline.protocol.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    PartitionPosition,
    next_epoch,
)
from strandline.types import TopicPartition

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "FetchSessionCache",
    "PartitionPosition",
    "SessionFetch",
    "next_epoch",
    "session_key",
]

# Kafka's max.incremental.fetch.session.cache.slots.
DEFAULT_CACHE_SLOTS = 1000


def session_key(session_id: int) -> tuple[str, int]:
    """The purgatory key a session's parked fetch waits on."""
    return ("fetch-session", session_id)


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetcher's position and what it was last told."""

    position: PartitionPosition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class PartitionAnswer:
    """What a read of one partition found, for deciding whether a response names it."""

    error: ErrorCode
    has_records: bool
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # Data readable at this partition's position was left out (response budget,
    # throttle): it must be read again at the next fetch even with no new append.
    more_available: bool = False
    # A diverging_epoch is answered: always named, so the fetcher truncates (Kafka's
    # FetchSession does the same).
    diverging: bool = False


@dataclass(eq=False)
class FetchSession:
    id: int
    replica_id: int
    # The epoch the next incremental fetch must carry.
    epoch: int
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    # Partitions changed (append, HW move, leadership) since the last response.
    dirty: set[TopicPartition] = field(default_factory=set)
    last_used_ms: int = 0
    # Who opened it (principal and host): only they may use or close it.
    owner: str = ""

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


class SessionFetch:
    """One fetch against the cache: which partitions to read, and which to answer."""

    def __init__(
        self,
        cache: FetchSessionCache,
        session: FetchSession | None,
        full: bool,
        positions: dict[TopicPartition, PartitionPosition],
    ) -> None:
        self.cache = cache
        self.session = session
        self.full = full
        # Full: the request's partitions. Incremental: the session's dirty partitions
        # and those the request named; grows while the fetch waits (`to_read`).
        self.positions = positions

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID

    def to_read(self) -> dict[TopicPartition, PartitionPosition]:
        """The partitions to read now: for a parked incremental fetch, those marked dirty
        since it was opened are added."""
        self.take_new()
        return self.positions

    def take_new(self) -> dict[TopicPartition, PartitionPosition]:
        """Fold the session's dirty partitions into this fetch; returns just those."""
        session = self.session
        if session is None or self.full or not session.dirty:
            return {}
        new = {}
        for tp in session.dirty:
            cached = session.partitions.get(tp)
            if cached is not None:
                new[tp] = self.positions[tp] = cached.position
        session.dirty.clear()
        return new

    def respond(self, answers: dict[TopicPartition, PartitionAnswer]) -> list[TopicPartition]:
        """The partitions the response names, in read order; the session remembers what
        it told the fetcher. A full fetch names every partition."""
        session = self.session
        if session is None:
            return list(answers)
        named = []
        for tp, answer in answers.items():
            cached = session.partitions.get(tp)
            if cached is None:
                continue
            if answer.more_available:
                session.dirty.add(tp)
            changed = (
                answer.error != ErrorCode.none
                or answer.diverging
                or answer.has_records
                or answer.high_watermark != cached.high_watermark
                or answer.last_stable_offset != cached.last_stable_offset
                or answer.log_start_offset != cached.log_start_offset
            )
            if self.full or changed:
                named.append(tp)
                cached.high_watermark = answer.high_watermark
                cached.last_stable_offset = answer.last_stable_offset
                cached.log_start_offset = answer.log_start_offset
        return named


class FetchSessionCache:
    """The broker's fetch sessions, least recently used first."""

    def __init__(self, slots: int = DEFAULT_CACHE_SLOTS) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._holders: dict[TopicPartition, set[int]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def open_fetch(
        self,
        session_id: int,
        epoch: int,
        replica_id: int,
        requested: dict[TopicPartition, PartitionPosition],
        forgotten: Iterable[TopicPartition],
        now_ms: int,
        owner: str = "",
    ) -> SessionFetch | ErrorCode:
        """Apply one Fetch request's session fields (KIP-227's table); an error code is
        the answer for the whole request. `owner`: who is asking (principal and host)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            old = self._sessions.get(session_id) if session_id != INVALID_SESSION_ID else None
            if old is not None and old.owner == owner:
                self._remove(session_id)  # the fetcher closes its old session
            session = None
            if epoch == INITIAL_EPOCH:
                session = self._create(replica_id, requested, now_ms, owner)
            return SessionFetch(self, session, True, requested)
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id or session.owner != owner:
            return ErrorCode.fetch_session_id_not_found
        if epoch != session.epoch:
            return ErrorCode.invalid_fetch_session_epoch
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        for tp in forgotten:
            if session.partitions.pop(tp, None) is not None:
                self._release(tp, session.id)
            session.dirty.discard(tp)
        for tp, position in requested.items():
            cached = session.partitions.get(tp)
            if cached is None:
                session.partitions[tp] = CachedPartition(position)
                self._holders.setdefault(tp, set()).add(session.id)
            else:
                cached.position = position
        positions = dict(requested)
        fetch = SessionFetch(self, session, False, positions)
        fetch.to_read()
        return fetch

    def touch(self, tp: TopicPartition) -> list[int]:
        """Partition `tp` changed: mark it dirty in the sessions holding it; returns them."""
        holders = self._holders.get(tp)
        if not holders:
            return []
        for session_id in holders:
            self._sessions[session_id].dirty.add(tp)
        return list(holders)

    def _create(
        self,
        replica_id: int,
        requested: dict[TopicPartition, PartitionPosition],
        now_ms: int,
        owner: str,
    ) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self._sessions) >= self.slots:
            self._evict()
        session = FetchSession(
            self._new_id(),
            replica_id,
            next_epoch(INITIAL_EPOCH),
            {tp: CachedPartition(p) for tp, p in requested.items()},
            last_used_ms=now_ms,
            owner=owner,
        )
        self._sessions[session.id] = session
        for tp in session.partitions:
            self._holders.setdefault(tp, set()).add(session.id)
        return session

    def _new_id(self) -> int:
        """A random positive int32 not in use (Kafka's newSessionId): a sequential id
        would tell anyone the ids of the sessions opened before theirs."""
        while True:
            session_id = secrets.randbelow(0x7FFFFFFF) + 1
            if session_id not in self._sessions:
                return session_id

    def _evict(self) -> None:
        """Make room: the least recently used consumer session goes first; a follower's
        only when every slot holds one (replication matters more than a consumer's
        per-request savings, as Kafka's eviction favours the sessions of followers)."""
        victim = next((s.id for s in self._sessions.values() if not s.is_follower), None)
        if victim is None:
            victim = next(iter(self._sessions))
        self._remove(victim)

    def _remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        for tp in session.partitions:
            self._release(tp, session_id)

    def _release(self, tp: TopicPartition, session_id: int) -> None:
        holders = self._holders.get(tp)
        if holders is not None:
            holders.discard(session_id)
            if not holders:
                del self._holders[tp]

    def last_fetch_ms(self, session_id: int, tp: TopicPartition) -> int | None:
        """When the session last fetched, if it holds `tp` (then its fetcher asked for
        that partition then too, without naming it)."""
        session = self._sessions.get(session_id)
        if session is None or tp not in session.partitions:
            return None
        return session.last_used_ms
