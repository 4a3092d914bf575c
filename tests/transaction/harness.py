"""Drives the pure TransactionCoordinator like the shell does, with an in-memory log."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strandline.transaction.coordinator import TransactionCoordinator
from strandline.transaction.metadata import TxnState
from strandline.transaction.model import (
    AppendToTxnLog,
    DescribedTxn,
    Effect,
    InitProducerIdResult,
    Respond,
    SendMarkers,
    TxnConfig,
    TxnResult,
)
from strandline.transaction.records import decode_key, decode_value
from strandline.types import TopicPartition

E = ErrorCode
COORDINATOR_EPOCH = 5


@dataclass
class Harness:
    config: TxnConfig = field(default_factory=lambda: TxnConfig(num_partitions=1))
    now: int = 1_000
    # What the shell would do with each effect; tests change these to inject failures.
    append_error: ErrorCode = E.none
    auto_markers: bool = True

    def __post_init__(self) -> None:
        self.c = TransactionCoordinator(self.config)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.responses: dict[int, object] = {}
        self.markers: list[SendMarkers] = []
        self.held_appends: list[AppendToTxnLog] = []
        self.hold_appends = False
        self._tokens = itertools.count(1)
        self._ids = itertools.count(4_000)

    def own(self, partition: int = 0, epoch: int = COORDINATOR_EPOCH, records=()) -> None:
        self.c.begin_loading(partition, epoch)
        self.run(self.c.load(partition, epoch, list(records), self.now))

    def run(self, effects: list[Effect]) -> None:
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            if isinstance(effect, Respond):
                self.responses[effect.token] = effect.response
            elif isinstance(effect, AppendToTxnLog):
                if self.hold_appends:
                    self.held_appends.append(effect)
                    continue
                if self.append_error is E.none:
                    self.log.extend(effect.records)
                queue += self.c.append_done(effect.append_id, self.append_error, self.now)
            elif isinstance(effect, SendMarkers):
                self.markers.append(effect)
                if self.auto_markers:
                    results = dict.fromkeys(effect.partitions, E.none)
                    queue += self.c.markers_written(
                        effect.transactional_id, effect.coordinator_epoch, results, self.now
                    )

    # -- requests ------------------------------------------------------------------------

    def init(
        self, txn_id: str, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None
    ) -> InitProducerIdResult:
        token = next(self._tokens)
        fresh = next(self._ids) if self.c.needs_producer_id(txn_id, expected) else None
        self.run(self.c.init_producer_id(token, txn_id, timeout_ms, expected, self.now, fresh))
        answer = self.responses.pop(token)
        assert isinstance(answer, InitProducerIdResult)
        return answer

    def add(self, txn_id: str, pid: int, epoch: int, *tps: TopicPartition) -> ErrorCode:
        token = next(self._tokens)
        self.run(self.c.add_partitions(token, txn_id, pid, epoch, tps, self.now))
        return self._error(token)

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        token = next(self._tokens)
        self.run(self.c.end_txn(token, txn_id, pid, epoch, commit, self.now))
        return self._error(token)

    def _error(self, token: int) -> ErrorCode:
        answer = self.responses.pop(token)
        assert isinstance(answer, TxnResult)
        return answer.error

    def describe(self, txn_id: str) -> DescribedTxn:
        return self.c.describe(txn_id)

    def logged_states(self, txn_id: str) -> list[str]:
        """The states written to the log for `txn_id`, in order (None: tombstone)."""
        out = []
        for key, value in self.log:
            if decode_key(key) == txn_id:
                state = None if value is None else TxnState.from_id(decode_value(value).state_id)
                out.append("tombstone" if state is None else state.display_name)
        return out
