"""Kafka's ZooKeeper metadata operations over kazoo (KafkaZkClient's role).

Threading: kazoo runs its own threads. Watch callbacks registered here run on
kazoo's event thread, never on the broker's asyncio loop; the broker must marshal
them onto its loop, e.g. `zk.watch_children(path, on_loop(loop, handler))`, which
wraps `loop.call_soon_threadsafe`. The blocking calls below are meant for start-up,
tools and the controller's executor; each is one or a few ZooKeeper round trips.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkVersionConflictError,
)
from strandline.coordination.zk_config_znodes import ConfigZnodes
from strandline.coordination.zk_ops import CreateWrite, SetWrite, ZkWrite
from strandline.coordination.zk_partition_states import PartitionStateZnodes
from strandline.coordination.znodes import Assignment, BrokerRegistration
from strandline.storage.producer_state import (
    LATEST_PRODUCER_ID_BLOCK_ZNODE,
    ProducerIdBlock,
    decode_producer_id_block,
    encode_producer_id_block,
    producer_id_block,
)
from strandline.topic_ids import random_topic_id
from strandline.types import TopicPartition


def split_connect_string(connect: str) -> tuple[str, str]:
    """`host:port[,host:port]/chroot` -> (hosts, "/chroot" or "")."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def on_loop(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any]) -> Callable[..., None]:
    """Wrap `callback` so that calling it from kazoo's thread runs it on `loop`."""

    def marshal(*args: Any) -> None:
        loop.call_soon_threadsafe(callback, *args)

    return marshal


def _now_ms() -> int:
    return int(time.time() * 1000)


class ZkClient(PartitionStateZnodes, ConfigZnodes):
    """One ZooKeeper session, chrooted as `zookeeper.connect` says: brokers, topics,
    the controller, ISR notifications, admin znodes and producer ids here; partition
    states and configs in their own modules."""

    def __init__(
        self, connect: str, session_timeout_ms: int = 18000, connect_timeout_s: float = 15.0
    ):
        self.connect_string = connect
        self.hosts, self.chroot = split_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self._kazoo: KazooClient | None = None
        # zkVersion of /controller_epoch after our last successful election: controller
        # writes can be fenced on it (Kafka's checkControllerEpoch multi-op).
        self.controller_epoch_zk_version: int | None = None
        # Whether the server answers multiRead (ZooKeeper 3.6+); cleared on refusal.
        self._multi_read = True

    # --- session ---------------------------------------------------------------------

    @property
    def kazoo(self) -> KazooClient:
        if self._kazoo is None:
            raise RuntimeError("ZkClient is not connected; call connect() first")
        return self._kazoo

    def connect(self) -> ZkClient:
        if self.chroot:
            # Like Kafka: create the chroot path if it is missing, then chroot to it.
            bootstrap = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000)
            try:
                bootstrap.start(timeout=self.connect_timeout_s)
                bootstrap.ensure_path(self.chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        client = KazooClient(hosts=self.hosts + self.chroot, timeout=self.session_timeout_ms / 1000)
        try:
            client.start(timeout=self.connect_timeout_s)
            for path in znodes.PERSISTENT_PATHS:
                client.ensure_path(path)
        except BaseException:
            # kazoo keeps retrying in its threads unless told to stop.
            client.stop()
            client.close()
            raise
        self._kazoo = client
        return self

    def close(self) -> None:
        client, self._kazoo = self._kazoo, None
        if client is not None:
            client.stop()
            client.close()

    def __enter__(self) -> ZkClient:
        # `with ZkClient(...).connect() as zk:` must not open a second session.
        return self if self._kazoo is not None else self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def session_id(self) -> int:
        return int(self.kazoo.client_id[0])

    def add_state_listener(self, listener: Callable[[KazooState], Any]) -> None:
        """Called on kazoo's thread with LOST / SUSPENDED / CONNECTED.

        After LOST, kazoo opens a new session: the ephemeral broker and controller
        znodes are gone and the broker must register again (Kafka's re-registration).
        """
        self.kazoo.add_listener(listener)

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

        A broker restarted right after a crash finds its previous incarnation's znode
        still there until that session expires; we wait up to `stale_wait_s` (default
        1.5 x our session timeout + 1 s) for it to vanish, then raise BrokerIdInUseError:
        a znode that outlives that is held by a live broker with the same id.
        """
        reg = BrokerRegistration(
            broker_id=broker_id,
            host=host,
            port=port,
            rack=rack,
            endpoints=tuple(endpoints),
            timestamp_ms=_now_ms(),
            security_protocols=tuple(sorted((security_protocols or {}).items())),
        )
        data = znodes.encode_broker_registration(reg)
        path = znodes.broker_path(broker_id)
        if stale_wait_s is None:
            stale_wait_s = 1.5 * self.session_timeout_ms / 1000 + 1.0
        deadline = time.monotonic() + stale_wait_s
        while True:
            try:
                _, stat = self.kazoo.create(path, data, ephemeral=True, include_data=True)
                return int(stat.czxid)
            except NodeExistsError:
                pass
            gone = threading.Event()
            try:
                _, stat = self.kazoo.get(path, watch=lambda _event, gone=gone: gone.set())
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.session_id:
                # Our own node (a retried create after a connection blip) keeps its epoch.
                return int(stat.czxid)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerIdInUseError(
                    f"broker.id {broker_id} is already registered at {self.chroot}{path} by "
                    f"another live ZooKeeper session (0x{stat.ephemeralOwner:x}); is another "
                    "broker with the same broker.id running?"
                )
            gone.wait(remaining)

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        try:
            data, stat = self.kazoo.get(znodes.broker_path(broker_id))
        except NoNodeError:
            return None
        return znodes.decode_broker_registration(broker_id, data, epoch=stat.czxid)

    def get_live_brokers(self) -> dict[int, BrokerRegistration]:
        pending = [
            (int(child), self.kazoo.get_async(znodes.broker_path(int(child))))
            for child in self.kazoo.get_children(znodes.BROKER_IDS_PATH)
        ]
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:  # it may vanish between the listing and the read
                continue
            brokers[broker_id] = znodes.decode_broker_registration(
                broker_id, data, epoch=stat.czxid
            )
        return dict(sorted(brokers.items()))

    # --- topics ----------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        assignment: Assignment,
        config: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Write the topic's config, then its assignment with a new topic id (Kafka's
        order: a watcher that sees the topic can already read its config). Returns the
        id."""
        if self.kazoo.exists(znodes.topic_path(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self._set_or_create(
            znodes.topic_config_path(name), znodes.encode_topic_config(config or {})
        )
        topic_id = topic_id or random_topic_id()
        try:
            self.kazoo.create(
                znodes.topic_path(name), znodes.encode_topic_assignment(assignment, topic_id)
            )
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        return topic_id

    def new_topic_id(self, name: str) -> uuid.UUID:
        """An id for a topic that has none (the controller's ControllerZk hook)."""
        return random_topic_id()

    def get_all_topics(self) -> list[str]:
        return sorted(self.kazoo.get_children(znodes.BROKER_TOPICS_PATH))

    def get_topic_assignment(self, name: str) -> Assignment | None:
        try:
            data, _ = self.kazoo.get(znodes.topic_path(name))
        except NoNodeError:
            return None
        return znodes.decode_topic_assignment(data)

    def get_topic_znode(self, name: str) -> tuple[Assignment, uuid.UUID | None, int] | None:
        """(assignment, topic id or None, zkVersion) of /brokers/topics/<name>."""
        try:
            data, stat = self.kazoo.get(znodes.topic_path(name))
        except NoNodeError:
            return None
        return znodes.decode_topic_assignment(data), znodes.decode_topic_id(data), stat.version

    def get_topic_id(self, name: str) -> uuid.UUID | None:
        found = self.get_topic_znode(name)
        return None if found is None else found[1]

    def set_topic_assignment(
        self, name: str, assignment: Assignment, expected_version: int = -1
    ) -> int:
        """Rewrite the assignment, keeping the znode's topic id (read first; without an
        expected version, the write is conditional on that read)."""
        path = znodes.topic_path(name)
        data, stat = self.kazoo.get(path)
        topic_id = znodes.decode_topic_id(data)
        version = stat.version if expected_version == -1 else expected_version
        try:
            stat = self.kazoo.set(
                path, znodes.encode_topic_assignment(assignment, topic_id), version
            )
        except BadVersionError:
            raise ZkVersionConflictError(path, version) from None
        return int(stat.version)

    # --- topic deletion --------------------------------------------------------------

    def mark_topic_for_deletion(self, name: str) -> None:
        try:
            self.kazoo.create(znodes.delete_topic_path(name), b"")
        except NodeExistsError:
            pass

    def get_topics_marked_for_deletion(self) -> list[str]:
        return sorted(self.kazoo.get_children(znodes.DELETE_TOPICS_PATH))

    def delete_topic_znodes(self, name: str) -> None:
        """Remove the topic's assignment, partition states, config and deletion mark."""
        for path in (
            znodes.topic_path(name),
            znodes.topic_config_path(name),
            znodes.delete_topic_path(name),
        ):
            try:
                self.kazoo.delete(path, recursive=True)
            except NoNodeError:
                pass
            except NotEmptyError:  # a child appeared meanwhile; once more
                self.kazoo.delete(path, recursive=True)

    # --- controller ------------------------------------------------------------------

    def get_controller(self) -> int | None:
        try:
            data, _ = self.kazoo.get(znodes.CONTROLLER_PATH)
        except NoNodeError:
            return None
        return znodes.decode_controller(data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, zkVersion of /controller_epoch) or None before any election."""
        try:
            data, stat = self.kazoo.get(znodes.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return znodes.decode_controller_epoch(data), int(stat.version)

    def try_elect_controller(self, broker_id: int) -> int | None:
        """Try to become controller; returns the new controller epoch, or None if another
        broker holds /controller or won the race for /controller_epoch.

        One ZooKeeper multi-op creates the ephemeral /controller and bumps
        /controller_epoch conditionally (Kafka: registerControllerAndIncrementControllerEpoch),
        so two brokers can never both win the same epoch.
        """
        current = self.get_controller_epoch()
        if current is None:
            try:
                self.kazoo.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        new_epoch = epoch + 1
        txn = self.kazoo.transaction()
        txn.create(
            znodes.CONTROLLER_PATH, znodes.encode_controller(broker_id, _now_ms()), ephemeral=True
        )
        txn.set_data(
            znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(new_epoch), version
        )
        results = txn.commit()
        if any(isinstance(r, Exception) for r in results):
            return None
        self.controller_epoch_zk_version = int(results[1].version)
        return new_epoch

    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if this broker holds it (controlled shutdown, tests)."""
        try:
            data, stat = self.kazoo.get(znodes.CONTROLLER_PATH)
        except NoNodeError:
            return
        if znodes.decode_controller(data) == broker_id:
            try:
                self.kazoo.delete(znodes.CONTROLLER_PATH, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass
        self.controller_epoch_zk_version = None

    # --- ISR change notifications ----------------------------------------------------

    def create_isr_change_notification(self, tps: Iterable[TopicPartition]) -> str:
        """Persistent sequential /isr_change_notification/isr_change_<seq>; returns its name."""
        path: str = self.kazoo.create(
            f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}",
            znodes.encode_isr_change_notification(sorted(set(tps))),
            sequence=True,
        )
        return path.rsplit("/", 1)[1]

    def get_isr_change_notifications(self) -> dict[str, list[TopicPartition]]:
        """Every pending notification, read pipelined: a restarted broker rejoining the
        ISRs of thousands of partitions leaves thousands of them."""
        parent = znodes.ISR_CHANGE_NOTIFICATION_PATH
        pending = [
            (child, self.kazoo.get_async(f"{parent}/{child}"))
            for child in sorted(self.kazoo.get_children(parent))
        ]
        notifications: dict[str, list[TopicPartition]] = {}
        for child, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            notifications[child] = znodes.decode_isr_change_notification(data)
        return notifications

    def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            try:
                self.kazoo.delete(f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{name}")
            except NoNodeError:
                pass

    # --- writes fenced by the controller epoch ---------------------------------------

    def children_or_none(self, path: str) -> list[str] | None:
        """The children of `path`, or None when it does not exist."""
        try:
            return list(self.kazoo.get_children(path))
        except NoNodeError:
            return None

    def fenced_multi(self, writes: Sequence[ZkWrite]) -> None:
        """Commit `writes` in one multi-op behind a check of /controller_epoch at the
        version this client's election produced. Raises ControllerMovedError when
        another controller was elected since, ZkVersionConflictError when a write met
        a znode that changed meanwhile (nothing is written in either case)."""
        if not writes:
            return
        txn = self.kazoo.transaction()
        txn.check(znodes.CONTROLLER_EPOCH_PATH, self._fencing_version())
        for w in writes:
            if isinstance(w, CreateWrite):
                txn.create(w.path, w.data)
            elif isinstance(w, SetWrite):
                txn.set_data(w.path, w.data, w.version)
            else:
                txn.delete(w.path, w.version)
        results = txn.commit()
        if isinstance(results[0], BadVersionError):
            raise ControllerMovedError("/controller_epoch changed; controller write fenced")
        for w, result in zip(writes, results[1:], strict=True):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise ZkVersionConflictError(w.path, getattr(w, "version", None), repr(result))
        if isinstance(results[0], Exception):
            raise ControllerMovedError(f"controller write failed: {results[0]!r}")

    # --- admin znodes ----------------------------------------------------------------

    def get_partition_reassignment(self) -> dict[TopicPartition, list[int]]:
        return self._get_admin(znodes.REASSIGN_PARTITIONS_PATH, znodes.decode_reassignment, {})

    def create_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """Fails with NodeExistsError while a reassignment is in progress, as Kafka's tool does."""
        self.kazoo.create(
            znodes.REASSIGN_PARTITIONS_PATH, znodes.encode_reassignment(reassignment), makepath=True
        )

    def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """The controller rewrites the znode as partitions complete; empty deletes it."""
        if reassignment:
            self._set_or_create(
                znodes.REASSIGN_PARTITIONS_PATH, znodes.encode_reassignment(reassignment)
            )
        else:
            self.delete_quietly(znodes.REASSIGN_PARTITIONS_PATH)

    def get_preferred_replica_election(self) -> list[TopicPartition]:
        return self._get_admin(
            znodes.PREFERRED_REPLICA_ELECTION_PATH, znodes.decode_preferred_replica_election, []
        )

    def create_preferred_replica_election(self, tps: Iterable[TopicPartition]) -> None:
        self.kazoo.create(
            znodes.PREFERRED_REPLICA_ELECTION_PATH,
            znodes.encode_preferred_replica_election(sorted(set(tps))),
            makepath=True,
        )

    def delete_preferred_replica_election(self) -> None:
        self.delete_quietly(znodes.PREFERRED_REPLICA_ELECTION_PATH)

    def _get_admin(self, path: str, decode: Callable[[bytes], Any], empty: Any) -> Any:
        try:
            data, _ = self.kazoo.get(path)
        except NoNodeError:
            return empty
        return decode(data)

    def delete_quietly(self, path: str) -> None:
        try:
            self.kazoo.delete(path)
        except NoNodeError:
            pass

    # --- producer id blocks ----------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the producer-id block after the latest one (Kafka's ZK-era ProducerIdManager).

        Reads `/latest_producer_id_block`, then creates it (first claim in the cluster) or
        sets it conditionally on the zkVersion just read; a broker that loses the race
        (NodeExists / BadVersion) rereads the winner's block and claims the one after it.
        Ids are thus unique across the cluster and never reused.
        """
        while True:
            try:
                data, stat = self.kazoo.get(LATEST_PRODUCER_ID_BLOCK_ZNODE)
            except NoNodeError:
                block = producer_id_block(None, broker_id)
                try:
                    self.kazoo.create(
                        LATEST_PRODUCER_ID_BLOCK_ZNODE, encode_producer_id_block(block)
                    )
                except NodeExistsError:
                    continue  # another broker created it first: claim after its block
                return block
            latest = decode_producer_id_block(data) if data else None
            block = producer_id_block(latest, broker_id)
            try:
                self.kazoo.set(
                    LATEST_PRODUCER_ID_BLOCK_ZNODE,
                    encode_producer_id_block(block),
                    version=stat.version,
                )
            except BadVersionError:
                continue  # lost the race: reread the block the winner wrote
            return block

    # --- watches ---------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> ChildrenWatch:
        """Call `callback(children)` now and on every change of `path`'s children.

        Runs on kazoo's thread: wrap the callback with `on_loop(loop, ...)`. The path is
        created if missing so the watch can be set.
        """
        self.kazoo.ensure_path(path)

        def fire(children: list[str]) -> None:
            callback(sorted(children))

        return ChildrenWatch(self.kazoo, path, fire)

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], Any]
    ) -> DataWatch:
        """Call `callback(data, stat)` now and on every change; (None, None) when the znode
        does not exist (e.g. /controller after the controller died). Runs on kazoo's
        thread: wrap the callback with `on_loop(loop, ...)`."""

        def fire(data: bytes | None, stat: ZnodeStat | None) -> None:
            callback(data if stat is not None else None, stat)

        return DataWatch(self.kazoo, path, fire)
