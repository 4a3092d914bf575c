"""The partition-state znodes of ZkClient (/brokers/topics/<t>/partitions/<p>/state):
reads pipelined as multiReads, creates and conditional writes batched into multi-ops,
optionally fenced on /controller_epoch (Kafka's checkControllerEpoch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    MarshallingError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    UnimplementedError,
)

from strandline.coordination import znodes
from strandline.coordination.errors import ControllerMovedError, ZkVersionConflictError
from strandline.coordination.multi_read import multi_read_async
from strandline.coordination.znodes import LeaderAndIsr
from strandline.types import TopicPartition

# Partition-state writes per ZooKeeper multi-op: ~150 bytes each, far below the 1 MB
# request limit (jute.maxbuffer), and small enough that several multis are in flight.
STATE_WRITES_PER_MULTI = 250


class PartitionStateZnodes:
    """A part of ZkClient; blocking calls on its session."""

    # Whether the server answers multiRead (ZooKeeper 3.6+); cleared on refusal.
    _multi_read: bool
    # zkVersion of /controller_epoch after this client's last election (fencing).
    controller_epoch_zk_version: int | None

    @property
    def kazoo(self) -> KazooClient:
        raise NotImplementedError  # the session: ZkClient.kazoo

    def get_partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None:
        """(state, zkVersion), or None when the partition has no state znode yet."""
        try:
            data, stat = self.kazoo.get(znodes.partition_state_path(tp))
        except NoNodeError:
            return None
        return znodes.decode_leader_and_isr(data), int(stat.version)

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[LeaderAndIsr, int]]:
        """Pipelined multiReads (a failover reads every partition's state): a round
        trip's latency for many partitions, and one request per thousand of them;
        pipelined getData per partition on a server without multiRead."""
        tps = list(tps)
        paths = [znodes.partition_state_path(tp) for tp in tps]
        states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = {}
        found: list[tuple[TopicPartition, Any]] = []
        if self._multi_read and len(tps) > 1:
            by_path = dict(zip(paths, tps, strict=True))
            unread: list[str] = []
            for chunk, async_result in multi_read_async(self.kazoo, paths):
                try:
                    answers = async_result.get()
                except (UnimplementedError, MarshallingError, ConnectionLoss) as exc:
                    if not isinstance(exc, ConnectionLoss):
                        self._multi_read = False  # an old server: not again
                    unread += chunk
                    continue
                for path, answer in zip(chunk, answers, strict=True):
                    if isinstance(answer, NoNodeError):
                        continue
                    if isinstance(answer, Exception):
                        unread.append(path)  # read it alone below, raising as before
                        continue
                    found.append((by_path[path], answer))
            tps = [by_path[p] for p in unread]
        pending = [(tp, self.kazoo.get_async(znodes.partition_state_path(tp))) for tp in tps]
        for tp, result in pending:
            try:
                found.append((tp, result.get()))
            except NoNodeError:
                continue
        for tp, (data, stat) in found:
            states[tp] = (znodes.decode_leader_and_isr(data), int(stat.version))
        return states

    def create_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> int:
        """Create the state znode (and its parents); returns its zkVersion (0).

        Raises ZkVersionConflictError when it already exists: a create is a write
        conditional on absence.
        """
        path = znodes.partition_state_path(tp)
        try:
            self.kazoo.create(path, znodes.encode_leader_and_isr(state), makepath=True)
        except NodeExistsError:
            raise ZkVersionConflictError(path, None, "state znode already exists") from None
        return 0

    def create_partition_states(
        self,
        states: dict[TopicPartition, LeaderAndIsr],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """Create many state znodes (a new topic's partitions coming online), with their
        partition znodes, STATE_WRITES_PER_MULTI partitions per multi-op and the multis
        pipelined. Each partition gets zkVersion 0 or the exception its create met
        (ZkVersionConflictError if it already exists, ControllerMovedError if fenced).

        One request per znode was the controller's cost for a large topic (docs/scaling.md):
        kazoo handles one request per turn of its connection loop, ~0.7 ms each on a
        loaded machine. A multi that fails (a znode that exists already) is done again
        one partition at a time, which tells the partitions apart."""
        topic_paths = sorted({znodes.topic_partitions_path(tp.topic) for tp in states})
        for result in [self.kazoo.create_async(p, b"") for p in topic_paths]:
            try:
                result.get()
            except (NodeExistsError, NoNodeError):
                pass  # a missing topic znode fails its partitions' creates below

        def ops(txn: Any, tp: TopicPartition, state: LeaderAndIsr) -> None:
            txn.create(znodes.partition_path(tp), b"")
            txn.create(znodes.partition_state_path(tp), znodes.encode_leader_and_isr(state))

        results: dict[TopicPartition, int | Exception] = {}
        failed: dict[TopicPartition, LeaderAndIsr] = {}
        for chunk, outcome, _answers in self._multis(
            list(states.items()), ops, fence_controller_epoch
        ):
            if outcome is None:
                results.update((tp, 0) for tp, _state in chunk)
            elif isinstance(outcome, ControllerMovedError):
                results.update((tp, outcome) for tp, _state in chunk)
            else:
                failed.update(chunk)
        if failed:
            results.update(self._create_states_one_by_one(failed, fence_controller_epoch))
        return results

    def _multis(
        self,
        items: list[tuple[TopicPartition, Any]],
        ops: Callable[[Any, TopicPartition, Any], None],
        fence_controller_epoch: bool,
    ) -> list[tuple[list[tuple[TopicPartition, Any]], Exception | None, list[Any]]]:
        """Commit `items` in pipelined multi-ops of STATE_WRITES_PER_MULTI, each behind
        the controller-epoch check when fenced: per chunk, None (committed),
        ControllerMovedError, or the first error another op met (nothing committed),
        and the multi's answers, one per op."""
        pending = []
        for start in range(0, len(items), STATE_WRITES_PER_MULTI):
            chunk = items[start : start + STATE_WRITES_PER_MULTI]
            txn = self.kazoo.transaction()
            if fence_controller_epoch:
                txn.check(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version())
            for tp, item in chunk:
                ops(txn, tp, item)
            pending.append((chunk, txn.commit_async()))
        outcomes: list[tuple[list[tuple[TopicPartition, Any]], Exception | None, list[Any]]] = []
        for chunk, async_result in pending:
            try:
                answers = list(async_result.get())
            except Exception as exc:  # noqa: BLE001 - the whole multi failed: per chunk
                outcomes.append((chunk, exc, []))
                continue
            if fence_controller_epoch and isinstance(answers[0], BadVersionError):
                moved = ControllerMovedError("/controller_epoch changed; write fenced")
                outcomes.append((chunk, moved, answers))
                continue
            errors = [
                a
                for a in answers
                if isinstance(a, Exception) and not isinstance(a, RolledBackError)
            ]
            if errors or any(isinstance(a, Exception) for a in answers):
                outcomes.append((chunk, errors[0] if errors else RolledBackError(), answers))
            else:
                outcomes.append((chunk, None, answers))
        return outcomes

    def _create_states_one_by_one(
        self,
        states: dict[TopicPartition, LeaderAndIsr],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """One request per znode, pipelined: tells apart the partitions of a multi that
        failed (an existing znode, a missing topic)."""
        parents = sorted(
            {znodes.topic_partitions_path(tp.topic) for tp in states}
            | {znodes.partition_path(tp) for tp in states}
        )
        # Parents first (shorter paths sort first), each level pipelined.
        for depth in sorted({p.count("/") for p in parents}):
            level = [p for p in parents if p.count("/") == depth]
            for result in [self.kazoo.create_async(p, b"") for p in level]:
                try:
                    result.get()
                except (NodeExistsError, NoNodeError):
                    pass  # a missing topic znode fails its partitions' creates below
        pending: list[tuple[TopicPartition, str, Any]] = []
        for tp, state in states.items():
            path = znodes.partition_state_path(tp)
            data = znodes.encode_leader_and_isr(state)
            if fence_controller_epoch:
                txn = self.kazoo.transaction()
                txn.check(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version())
                txn.create(path, data)
                pending.append((tp, path, txn.commit_async()))
            else:
                pending.append((tp, path, self.kazoo.create_async(path, data)))
        results: dict[TopicPartition, int | Exception] = {}
        for tp, path, async_result in pending:
            try:
                outcome = async_result.get()
            except NodeExistsError:
                results[tp] = ZkVersionConflictError(path, None, "state znode already exists")
                continue
            except Exception as exc:  # noqa: BLE001 - handed back per partition
                results[tp] = exc
                continue
            if fence_controller_epoch:
                check_result, create_result = outcome
                if isinstance(check_result, BadVersionError):
                    results[tp] = ControllerMovedError(
                        f"/controller_epoch changed; create of {path} fenced"
                    )
                elif isinstance(create_result, NodeExistsError):
                    results[tp] = ZkVersionConflictError(path, None, "state znode already exists")
                elif isinstance(create_result, Exception):
                    results[tp] = create_result
                elif isinstance(check_result, Exception):
                    results[tp] = check_result
                else:
                    results[tp] = 0
            else:
                results[tp] = 0
        return results

    def update_partition_state(
        self,
        tp: TopicPartition,
        state: LeaderAndIsr,
        expected_version: int,
        fence_controller_epoch: bool = False,
    ) -> int:
        """Conditional write of the state znode; returns the new zkVersion.

        With `fence_controller_epoch`, the write also requires /controller_epoch to be
        at the version this client's election produced (ControllerMovedError if not).
        """
        result = self.update_partition_states(
            {tp: (state, expected_version)}, fence_controller_epoch=fence_controller_epoch
        )[tp]
        if isinstance(result, Exception):
            raise result
        return result

    def update_partition_states(
        self,
        updates: dict[TopicPartition, tuple[LeaderAndIsr, int]],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """Many conditional writes, STATE_WRITES_PER_MULTI per multi-op, the multis
        pipelined (see create_partition_states). Each partition gets its new zkVersion
        or the exception its write met (ZkVersionConflictError, NoNodeError,
        ControllerMovedError); one failure does not stop the others: a multi holding
        one is done again one write at a time."""

        def ops(txn: Any, tp: TopicPartition, update: tuple[LeaderAndIsr, int]) -> None:
            state, expected_version = update
            txn.set_data(
                znodes.partition_state_path(tp),
                znodes.encode_leader_and_isr(state),
                expected_version,
            )

        results: dict[TopicPartition, int | Exception] = {}
        failed: dict[TopicPartition, tuple[LeaderAndIsr, int]] = {}
        if len(updates) > 1:
            for chunk, outcome, answers in self._multis(
                list(updates.items()), ops, fence_controller_epoch
            ):
                if outcome is None:
                    stats = answers[1:] if fence_controller_epoch else answers
                    results.update(
                        (tp, int(stat.version))
                        for (tp, _update), stat in zip(chunk, stats, strict=True)
                    )
                elif isinstance(outcome, ControllerMovedError):
                    results.update((tp, outcome) for tp, _update in chunk)
                else:
                    failed.update(chunk)
        else:
            failed = dict(updates)
        if failed:
            results.update(self._update_states_one_by_one(failed, fence_controller_epoch))
        return results

    def _update_states_one_by_one(
        self,
        updates: dict[TopicPartition, tuple[LeaderAndIsr, int]],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """One conditional write per request, pipelined: tells apart the partitions of
        a multi that failed."""
        pending: list[tuple[TopicPartition, str, int, Any]] = []
        for tp, (state, expected_version) in updates.items():
            path = znodes.partition_state_path(tp)
            data = znodes.encode_leader_and_isr(state)
            if fence_controller_epoch:
                txn = self.kazoo.transaction()
                txn.check(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version())
                txn.set_data(path, data, expected_version)
                pending.append((tp, path, expected_version, txn.commit_async()))
            else:
                pending.append(
                    (tp, path, expected_version, self.kazoo.set_async(path, data, expected_version))
                )
        results: dict[TopicPartition, int | Exception] = {}
        for tp, path, expected_version, async_result in pending:
            try:
                outcome = async_result.get()
            except BadVersionError:
                results[tp] = ZkVersionConflictError(path, expected_version)
                continue
            except Exception as exc:  # noqa: BLE001 - handed back per partition
                results[tp] = exc
                continue
            if fence_controller_epoch:
                # commit() reports failures as exception objects in its result list.
                check_result, set_result = outcome
                if isinstance(check_result, BadVersionError):
                    results[tp] = ControllerMovedError(
                        f"/controller_epoch changed; write to {path} fenced"
                    )
                elif isinstance(set_result, BadVersionError):
                    results[tp] = ZkVersionConflictError(path, expected_version)
                elif isinstance(set_result, Exception):
                    results[tp] = set_result
                elif isinstance(check_result, Exception):
                    results[tp] = check_result
                else:
                    results[tp] = int(set_result.version)
            else:
                results[tp] = int(outcome.version)
        return results

    def _fencing_version(self) -> int:
        if self.controller_epoch_zk_version is None:
            raise ControllerMovedError("this client never won a controller election")
        return self.controller_epoch_zk_version
