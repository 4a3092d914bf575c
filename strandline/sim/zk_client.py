"""One session on the simulated ZooKeeper (`sim/zookeeper.py:SimZooKeeper`), seen
through the same methods, arguments, results and errors as
`strandline.coordination.zk_client.ZkClient`, over the same paths and JSON codecs
(`strandline.coordination.znodes`), so controller and broker code can run against either
(both implement `coordination/zookeeper_client.py:ZooKeeperClient`).

Lost replies: `SimZkClient.lose_reply(...)` arms a fault for one of the session's next
requests: it fails before ZooKeeper applies it, or after, and the client sees
ConnectionLoss either way; the session may be expired in between (the reply was lost
because the connection stayed down past the session timeout). `SimZkClient.blip(...)`
makes each request lose its reply with probability 1/2 for a while, drawn from a seeded
generator.
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkVersionConflictError,
)
from strandline.coordination.zk_ops import CreateWrite, SetWrite, ZkWrite
from strandline.coordination.znodes import Assignment, BrokerRegistration, LeaderAndIsr
from strandline.coordination.zookeeper_client import ZooKeeperClient
from strandline.sim.zookeeper import (
    BadVersion,
    CheckOp,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    MultiFailed,
    NodeExists,
    NoNode,
    Op,
    SessionExpired,
    SetOp,
    SimZooKeeper,
    Watch,
    ZkError,
    Znode,
    ZnodeStat,
)
from strandline.storage.producer_state import (
    LATEST_PRODUCER_ID_BLOCK_ZNODE,
    ProducerIdBlock,
    decode_producer_id_block,
    encode_producer_id_block,
    producer_id_block,
)
from strandline.types import TopicPartition

__all__ = ["ReplyFault", "SimZkClient"]


class ReplyFault(NamedTuple):
    """A lost reply armed on a session: the request after `skip` others fails."""

    skip: int = 0
    after_apply: bool = False  # applied, then the reply is lost
    expire: bool = False  # the session expires before the client hears anything


class SimZkClient:
    """One session on a SimZooKeeper, with ZkClient's metadata operations.

    Every call on an expired session raises SessionExpired; the simulated broker then
    takes a new session (`SimZkClient(zk, zk.new_session())`) and registers again.
    """

    def __init__(self, zk: SimZooKeeper, session_id: int) -> None:
        self.zk = zk
        self._session_id = session_id
        # As ZkClient: /controller_epoch's zkVersion after our last won election.
        self.controller_epoch_zk_version: int | None = None
        self.fault: ReplyFault | None = None
        # A blip: until this time, each request loses its reply with probability 1/2,
        # drawn from the blip's own seeded generator (deterministic per schedule).
        self.blip_until_ms = -1
        self._blip_rng = random.Random(0)
        self.lost_replies = 0
        self._depth = 0  # calls in progress: a request's inner calls are not requests
        # ZkClient.connect ensures the persistent paths on every connect.
        zk.bootstrap()

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def alive(self) -> bool:
        return self.zk.is_alive(self._session_id)

    def close(self) -> None:
        """End the session, as ZkClient.close does: its ephemeral znodes go at once."""
        self.zk.expire(self._session_id)

    def lose_reply(self, fault: ReplyFault) -> None:
        """Arm a lost reply for one of the next requests (replacing one armed before)."""
        self.fault = fault

    def blip(self, until_ms: int, seed: int) -> None:
        """Cut the connection on and off until `until_ms` (shorter than the session
        timeout: the session survives, requests lose their replies)."""
        self.blip_until_ms = until_ms
        self._blip_rng = random.Random(seed)

    def _request(self, call: Callable[[], Any], name: str) -> Any:
        if (
            self._depth == 0
            and self.fault is None
            and self.zk.now_ms() < self.blip_until_ms
            and self._blip_rng.random() < 0.5
        ):
            self.fault = ReplyFault(0, self._blip_rng.random() < 0.5)
        fault = self.fault if self._depth == 0 else None
        if fault is not None and fault.skip > 0:
            self.fault = fault._replace(skip=fault.skip - 1)
            fault = None
        elif fault is not None:
            self.fault = None
        if fault is not None and not fault.after_apply:
            self._lose(fault, name)
        self._depth += 1
        try:
            result = call()
        finally:
            self._depth -= 1
        if fault is not None:
            self._lose(fault, name)
        return result

    def _lose(self, fault: ReplyFault, name: str) -> None:
        self.lost_replies += 1
        if fault.expire:
            self.zk.expire(self._session_id)
        applied = "after" if fault.after_apply else "before"
        raise ConnectionLoss(name, f"reply lost ({applied} it was applied)")

    def _live(self) -> None:
        if not self.zk.is_alive(self._session_id):
            raise SessionExpired(self._session_id)

    def _node(self, path: str) -> Znode | None:
        # Reads go straight to the tree: no stat tuple is built when nobody needs one.
        return self.zk.nodes.get(path)

    def _children(self, path: str) -> list[str]:
        node = self.zk.nodes.get(path)
        if node is None:
            raise NoNode(path)
        return list(node.children)

    # --- brokers ---------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        endpoints: Iterable[str] = (),
        stale_wait_s: float | None = None,
        security_protocols: Mapping[str, str] | None = None,
    ) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid).

        `stale_wait_s` is accepted and ignored: a simulated session is alive or gone, so
        a znode held by another session is held by a live broker and we raise at once.
        """
        self._live()
        reg = BrokerRegistration(
            broker_id=broker_id,
            host=host,
            port=port,
            rack=rack,
            endpoints=tuple(endpoints),
            timestamp_ms=self.zk.now_ms(),
            security_protocols=tuple(sorted((security_protocols or {}).items())),
        )
        path = znodes.broker_path(broker_id)
        try:
            self.zk.create(
                path,
                znodes.encode_broker_registration(reg),
                ephemeral=True,
                session_id=self._session_id,
            )
        except NodeExists:
            node = self.zk.nodes[path]
            if node.owner == self._session_id:
                # Our own node (a retried registration) keeps its epoch.
                return node.czxid
            raise BrokerIdInUseError(
                f"broker.id {broker_id} is already registered at {path} by another live "
                f"ZooKeeper session (0x{node.owner or 0:x}); is another broker with the "
                "same broker.id running?"
            ) from None
        return self.zk.nodes[path].czxid

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        self._live()
        node = self._node(znodes.broker_path(broker_id))
        if node is None:
            return None
        return znodes.decode_broker_registration(broker_id, node.data, epoch=node.czxid)

    def get_live_brokers(self) -> dict[int, BrokerRegistration]:
        self._live()
        brokers: dict[int, BrokerRegistration] = {}
        for child in self._children(znodes.BROKER_IDS_PATH):
            reg = self.get_broker(int(child))
            if reg is not None:
                brokers[reg.broker_id] = reg
        return dict(sorted(brokers.items()))

    # --- topics ----------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        assignment: Assignment,
        config: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Config first, then the assignment (Kafka's order, as ZkClient)."""
        self._live()
        path = znodes.topic_path(name)
        if path in self.zk.nodes:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self._set_or_create(
            znodes.topic_config_path(name), znodes.encode_topic_config(config or {})
        )
        topic_id = topic_id or self.new_topic_id(name)
        try:
            self.zk.create(path, znodes.encode_topic_assignment(assignment, topic_id))
        except NodeExists:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        return topic_id

    def new_topic_id(self, name: str) -> uuid.UUID:
        """Deterministic (the simulator draws nothing at random): the name and the
        zxid now, so a topic recreated under the same name gets another id."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"strandline-sim:{name}:{self.zk.zxid}")

    def get_all_topics(self) -> list[str]:
        self._live()
        return sorted(self._children(znodes.BROKER_TOPICS_PATH))

    def get_topic_assignment(self, name: str) -> Assignment | None:
        self._live()
        node = self._node(znodes.topic_path(name))
        return None if node is None else znodes.decode_topic_assignment(node.data)

    def get_topic_znode(self, name: str) -> tuple[Assignment, uuid.UUID | None, int] | None:
        self._live()
        node = self._node(znodes.topic_path(name))
        if node is None:
            return None
        return (
            znodes.decode_topic_assignment(node.data),
            znodes.decode_topic_id(node.data),
            node.version,
        )

    def get_topic_id(self, name: str) -> uuid.UUID | None:
        found = self.get_topic_znode(name)
        return None if found is None else found[1]

    def set_topic_assignment(
        self, name: str, assignment: Assignment, expected_version: int = -1
    ) -> int:
        """As ZkClient: keeps the topic id, conditional on the read without a version."""
        self._live()
        path = znodes.topic_path(name)
        data, stat = self.zk.get(path)
        version = stat.version if expected_version == -1 else expected_version
        encoded = znodes.encode_topic_assignment(assignment, znodes.decode_topic_id(data))
        try:
            stat = self.zk.set(path, encoded, version)
        except BadVersion:
            raise ZkVersionConflictError(path, version) from None
        return stat.version

    def get_topic_config(self, name: str) -> dict[str, str]:
        self._live()
        node = self._node(znodes.topic_config_path(name))
        return {} if node is None else znodes.decode_topic_config(node.data)

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        self._live()
        self._set_or_create(znodes.topic_config_path(name), znodes.encode_topic_config(config))
        self._announce_config_change(f"topics/{name}")

    def get_broker_config(self, entity: str) -> dict[str, str]:
        self._live()
        node = self._node(znodes.broker_config_path(entity))
        return {} if node is None else znodes.decode_broker_config(node.data)

    def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        self._live()
        self._set_or_create(znodes.broker_config_path(entity), znodes.encode_broker_config(config))
        self._announce_config_change(f"brokers/{entity}")

    def get_config_changes(self) -> dict[str, str]:
        self._live()
        changes: dict[str, str] = {}
        for child in sorted(self._children(znodes.CONFIG_CHANGES_PATH)):
            node = self._node(f"{znodes.CONFIG_CHANGES_PATH}/{child}")
            if node is not None:
                changes[child] = znodes.decode_config_change(node.data)
        return changes

    def _announce_config_change(self, entity_path: str) -> None:
        self.zk.create(
            f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(entity_path),
            sequence=True,
        )

    def _set_or_create(self, path: str, data: bytes) -> None:
        if path in self.zk.nodes:
            self.zk.set(path, data)
        else:
            self.zk.create(path, data, makepath=True)

    # --- partition state -------------------------------------------------------------

    def get_partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None:
        self._live()
        node = self._node(znodes.partition_state_path(tp))
        return None if node is None else (znodes.decode_leader_and_isr(node.data), node.version)

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[LeaderAndIsr, int]]:
        self._live()
        nodes = self.zk.nodes
        states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = {}
        for tp in tps:
            node = nodes.get(znodes.partition_state_path(tp))
            if node is not None:
                states[tp] = (znodes.decode_leader_and_isr(node.data), node.version)
        return states

    def create_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> int:
        """Returns zkVersion 0; ZkVersionConflictError if the znode already exists."""
        self._live()
        path = znodes.partition_state_path(tp)
        try:
            self.zk.create(path, znodes.encode_leader_and_isr(state), makepath=True)
        except NodeExists:
            raise ZkVersionConflictError(path, None, "state znode already exists") from None
        return 0

    def create_partition_states(
        self,
        states: dict[TopicPartition, LeaderAndIsr],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """Per partition: 0, or ZkVersionConflictError (exists), ControllerMovedError
        (fenced), NoNode (no topic znode)."""
        self._live()
        parents = sorted(
            {znodes.topic_partitions_path(tp.topic) for tp in states}
            | {znodes.partition_path(tp) for tp in states}
        )
        # As ZkClient: parents level by level, without makepath, so a partition of a
        # topic whose znode is gone fails with NoNode below instead of resurrecting it.
        for depth in sorted({p.count("/") for p in parents}):
            for parent in parents:
                if parent.count("/") == depth:
                    try:
                        self.zk.create(parent)
                    except (NodeExists, NoNode):
                        pass
        results: dict[TopicPartition, int | Exception] = {}
        for tp, state in states.items():
            path = znodes.partition_state_path(tp)
            data = znodes.encode_leader_and_isr(state)
            if fence_controller_epoch:
                ops: list[Op] = [
                    CheckOp(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version()),
                    CreateOp(path, data),
                ]
                try:
                    self.zk.multi(ops)
                except MultiFailed as failed:
                    results[tp] = self._fenced_failure(failed, path, None, "create of")
                    continue
            else:
                try:
                    self.zk.create(path, data)
                except NodeExists:
                    results[tp] = ZkVersionConflictError(path, None, "state znode already exists")
                    continue
                except ZkError as exc:
                    results[tp] = exc
                    continue
            results[tp] = 0
        return results

    def update_partition_state(
        self,
        tp: TopicPartition,
        state: LeaderAndIsr,
        expected_version: int,
        fence_controller_epoch: bool = False,
    ) -> int:
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
        """Per partition: the new zkVersion, or ZkVersionConflictError, NoNode,
        ControllerMovedError; one failure does not stop the others."""
        self._live()
        results: dict[TopicPartition, int | Exception] = {}
        for tp, (state, expected_version) in updates.items():
            path = znodes.partition_state_path(tp)
            data = znodes.encode_leader_and_isr(state)
            if fence_controller_epoch:
                ops: list[Op] = [
                    CheckOp(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version()),
                    SetOp(path, data, expected_version),
                ]
                try:
                    outcome = self.zk.multi(ops)
                except MultiFailed as failed:
                    results[tp] = self._fenced_failure(failed, path, expected_version, "write to")
                    continue
                stat = outcome[1]
                assert isinstance(stat, ZnodeStat)
                results[tp] = stat.version
            else:
                try:
                    results[tp] = self.zk.set(path, data, expected_version).version
                except BadVersion:
                    results[tp] = ZkVersionConflictError(path, expected_version)
                except ZkError as exc:
                    results[tp] = exc
        return results

    @staticmethod
    def _fenced_failure(
        failed: MultiFailed, path: str, expected_version: int | None, what: str
    ) -> Exception:
        # Op 0 is the /controller_epoch check, op 1 the partition's own write.
        if failed.index == 0 and isinstance(failed.cause, BadVersion):
            return ControllerMovedError(f"/controller_epoch changed; {what} {path} fenced")
        if failed.index == 1 and isinstance(failed.cause, BadVersion):
            return ZkVersionConflictError(path, expected_version)
        if failed.index == 1 and isinstance(failed.cause, NodeExists):
            return ZkVersionConflictError(path, None, "state znode already exists")
        return failed.cause

    def _fencing_version(self) -> int:
        if self.controller_epoch_zk_version is None:
            raise ControllerMovedError("this client never won a controller election")
        return self.controller_epoch_zk_version

    # --- topic deletion --------------------------------------------------------------

    def mark_topic_for_deletion(self, name: str) -> None:
        self._live()
        try:
            self.zk.create(znodes.delete_topic_path(name))
        except NodeExists:
            pass

    def get_topics_marked_for_deletion(self) -> list[str]:
        self._live()
        return sorted(self._children(znodes.DELETE_TOPICS_PATH))

    def delete_topic_znodes(self, name: str) -> None:
        """Remove the topic's assignment, partition states, config and deletion mark."""
        self._live()
        for path in (
            znodes.topic_path(name),
            znodes.topic_config_path(name),
            znodes.delete_topic_path(name),
        ):
            if path in self.zk.nodes:
                self.zk.delete(path, recursive=True)

    # --- controller ------------------------------------------------------------------

    def get_controller(self) -> int | None:
        self._live()
        node = self._node(znodes.CONTROLLER_PATH)
        return None if node is None else znodes.decode_controller(node.data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, zkVersion of /controller_epoch) or None before any election."""
        self._live()
        node = self._node(znodes.CONTROLLER_EPOCH_PATH)
        if node is None:
            return None
        return znodes.decode_controller_epoch(node.data), node.version

    def try_elect_controller(self, broker_id: int) -> int | None:
        """The new controller epoch, or None if /controller is held or /controller_epoch
        moved since we read it: one multi creates the ephemeral /controller and bumps
        /controller_epoch conditionally, so no two brokers win the same epoch."""
        self._live()
        current = self.get_controller_epoch()
        if current is None:
            try:
                self.zk.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(0))
            except NodeExists:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        new_epoch = epoch + 1
        ops: list[Op] = [
            CreateOp(
                znodes.CONTROLLER_PATH,
                znodes.encode_controller(broker_id, self.zk.now_ms()),
                ephemeral=True,
            ),
            SetOp(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(new_epoch), version),
        ]
        try:
            results = self.zk.multi(ops, session_id=self._session_id)
        except MultiFailed:
            return None
        stat = results[1]
        assert isinstance(stat, ZnodeStat)
        self.controller_epoch_zk_version = stat.version
        return new_epoch

    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if this broker holds it."""
        self._live()
        node = self._node(znodes.CONTROLLER_PATH)
        if node is not None and znodes.decode_controller(node.data) == broker_id:
            self.zk.delete(znodes.CONTROLLER_PATH, version=node.version)
        self.controller_epoch_zk_version = None

    # --- ISR change notifications ----------------------------------------------------

    def create_isr_change_notification(self, tps: Iterable[TopicPartition]) -> str:
        """Persistent sequential /isr_change_notification/isr_change_<seq>; returns its name."""
        self._live()
        path = self.zk.create(
            f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}",
            znodes.encode_isr_change_notification(sorted(set(tps))),
            sequence=True,
        )
        return path.rsplit("/", 1)[1]

    def get_isr_change_notifications(self) -> dict[str, list[TopicPartition]]:
        self._live()
        notifications: dict[str, list[TopicPartition]] = {}
        for child in sorted(self._children(znodes.ISR_CHANGE_NOTIFICATION_PATH)):
            node = self._node(f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{child}")
            if node is not None:
                notifications[child] = znodes.decode_isr_change_notification(node.data)
        return notifications

    def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        self._live()
        for name in names:
            self._delete_quietly(f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{name}")

    # --- writes fenced by the controller epoch ---------------------------------------

    def children_or_none(self, path: str) -> list[str] | None:
        self._live()
        return None if self._node(path) is None else self._children(path)

    def fenced_multi(self, writes: Sequence[ZkWrite]) -> None:
        """As ZkClient.fenced_multi: all of `writes` behind a check of /controller_epoch."""
        self._live()
        if not writes:
            return
        ops: list[Op] = [CheckOp(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version())]
        for w in writes:
            if isinstance(w, CreateWrite):
                ops.append(CreateOp(w.path, w.data))
            elif isinstance(w, SetWrite):
                ops.append(SetOp(w.path, w.data, w.version))
            else:
                ops.append(DeleteOp(w.path, w.version))
        try:
            self.zk.multi(ops)
        except MultiFailed as failed:
            if failed.index == 0:
                raise ControllerMovedError(
                    "/controller_epoch changed; controller write fenced"
                ) from None
            raise ZkVersionConflictError(
                failed.op.path, getattr(failed.op, "version", None), repr(failed.cause)
            ) from None

    # --- admin znodes ----------------------------------------------------------------

    def get_partition_reassignment(self) -> dict[TopicPartition, list[int]]:
        self._live()
        node = self._node(znodes.REASSIGN_PARTITIONS_PATH)
        return {} if node is None else znodes.decode_reassignment(node.data)

    def create_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """Raises NodeExists while a reassignment is in progress."""
        self._live()
        self.zk.create(
            znodes.REASSIGN_PARTITIONS_PATH, znodes.encode_reassignment(reassignment), makepath=True
        )

    def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """Rewrite the znode; an empty reassignment deletes it."""
        self._live()
        if reassignment:
            self._set_or_create(
                znodes.REASSIGN_PARTITIONS_PATH, znodes.encode_reassignment(reassignment)
            )
        else:
            self._delete_quietly(znodes.REASSIGN_PARTITIONS_PATH)

    def get_preferred_replica_election(self) -> list[TopicPartition]:
        self._live()
        node = self._node(znodes.PREFERRED_REPLICA_ELECTION_PATH)
        return [] if node is None else znodes.decode_preferred_replica_election(node.data)

    def create_preferred_replica_election(self, tps: Iterable[TopicPartition]) -> None:
        """Raises NodeExists while an election is pending."""
        self._live()
        self.zk.create(
            znodes.PREFERRED_REPLICA_ELECTION_PATH,
            znodes.encode_preferred_replica_election(sorted(set(tps))),
            makepath=True,
        )

    def delete_preferred_replica_election(self) -> None:
        self._live()
        self._delete_quietly(znodes.PREFERRED_REPLICA_ELECTION_PATH)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.zk.delete(path)
        except NoNode:
            pass

    # --- producer id blocks ----------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the block after /latest_producer_id_block's, as ZkClient does. Its retry
        on NodeExists/BadVersion is not needed: nothing runs between our read and write."""
        self._live()
        node = self._node(LATEST_PRODUCER_ID_BLOCK_ZNODE)
        if node is None:
            block = producer_id_block(None, broker_id)
            self.zk.create(LATEST_PRODUCER_ID_BLOCK_ZNODE, encode_producer_id_block(block))
            return block
        latest = decode_producer_id_block(node.data) if node.data else None
        block = producer_id_block(latest, broker_id)
        self.zk.set(LATEST_PRODUCER_ID_BLOCK_ZNODE, encode_producer_id_block(block), node.version)
        return block

    # --- watches ---------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> Watch:
        """`callback(sorted children)` on registration and on every change, delivered
        through the notification queue. The path is created if missing, as ZkClient does."""
        self._live()
        self.zk.ensure_path(path)

        def fire(children: list[str]) -> None:
            callback(sorted(children))

        return self.zk.watch_children(self._session_id, path, fire)

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], Any]
    ) -> Watch:
        """`callback(data, stat)` on registration and on every change; (None, None)
        while the znode does not exist."""
        self._live()
        return self.zk.watch_data(self._session_id, path, callback)


# The requests a broker or controller makes that can lose their reply: every metadata
# call of the ZkClient interface except watch registration and close.
_LOSSY_REQUESTS = (
    "get_live_brokers",
    "get_all_topics",
    "get_topic_assignment",
    "get_topic_znode",
    "set_topic_assignment",
    "get_partition_state",
    "get_partition_states",
    "create_partition_states",
    "update_partition_states",
    "get_topics_marked_for_deletion",
    "delete_topic_znodes",
    "get_controller",
    "get_controller_epoch",
    "try_elect_controller",
    "resign_controller",
    "create_isr_change_notification",
    "get_isr_change_notifications",
    "delete_isr_change_notifications",
    "children_or_none",
    "fenced_multi",
    "get_partition_reassignment",
    "get_preferred_replica_election",
    "update_partition_state",
)


def _lossy(name: str) -> Callable[..., Any]:
    method = getattr(SimZkClient, name)

    @functools.wraps(method)
    def request(self: SimZkClient, *args: Any, **kwargs: Any) -> Any:
        return self._request(lambda: method(self, *args, **kwargs), name)

    return request


for _name in _LOSSY_REQUESTS:
    setattr(SimZkClient, _name, _lossy(_name))


def _conforms(client: SimZkClient) -> ZooKeeperClient:
    """Never called: mypy (`make lint`) proves here that both clients implement the one
    ZooKeeper interface (the sim may import coordination; not the other way round)."""
    from strandline.coordination.zk_client import ZkClient

    real: ZooKeeperClient = ZkClient("")
    assert real is not None
    return client
