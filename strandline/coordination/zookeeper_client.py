"""The ZooKeeper metadata client as an interface (Kafka's KafkaZkClient's surface).

Two classes implement it: `coordination.zk_client.ZkClient` (a kazoo session on a real
ZooKeeper) and `sim.zk_client.SimZkClient` (a session on the simulator's in-memory
ZooKeeper). `make lint`'s mypy proves both conform (see the end of `sim/zk_client.py`);
`tests/coordination/test_zk_conformance.py` runs one behavioural suite against both.

The contract below is what code written against this interface may rely on. Errors are
kazoo's classes (the simulator's errors subclass them):

- `BadVersionError`: a conditional write lost. The client's own conditional writes raise
  (or hand back per partition) `ZkVersionConflictError`, which is a BadVersionError.
- `NoNodeError` / `NodeExistsError`: as ZooKeeper says, where a method says so.
- `ConnectionLoss`: any request may lose its reply; it may or may not have been applied.
- `SessionExpiredError`: the session is gone; its ephemeral znodes (broker registration,
  /controller) with it. Open a new client and register again.

Watch callbacks differ in *where* they run, not in what they see: ZkClient calls them on
kazoo's thread, SimZkClient queues them until the simulator runs its notifications.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from strandline.coordination.zk_ops import ZkWrite
from strandline.coordination.znodes import Assignment, BrokerRegistration, LeaderAndIsr
from strandline.storage.producer_state import ProducerIdBlock
from strandline.types import TopicPartition

__all__ = ["ControllerZk", "ZnodeStatView", "ZooKeeperClient"]


class ZnodeStatView(Protocol):
    """The fields of a znode's stat that callers read (kazoo's ZnodeStat names)."""

    @property
    def czxid(self) -> int: ...
    @property
    def mzxid(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def ephemeralOwner(self) -> int: ...  # noqa: N802 - ZooKeeper's name
    @property
    def numChildren(self) -> int: ...  # noqa: N802 - ZooKeeper's name


class ControllerZk(Protocol):
    """The operations the controller's effects use (`controller/zk_effects.py`)."""

    # /controller_epoch's zkVersion after this client's last won election: the version
    # every fenced write checks. None before an election and after resigning.
    controller_epoch_zk_version: int | None

    def get_controller(self) -> int | None:
        """The broker id in /controller, None when nobody is controller."""
        ...

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, zkVersion of /controller_epoch); None before any election."""
        ...

    def try_elect_controller(self, broker_id: int) -> int | None:
        """Create the ephemeral /controller and bump /controller_epoch in one multi-op.
        Returns the new epoch (and sets controller_epoch_zk_version), or None when
        /controller is held or /controller_epoch moved since it was read."""
        ...

    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if `broker_id` holds it (else leave it); forget the fencing
        version either way. Never raises for a missing znode."""
        ...

    def get_live_brokers(self) -> dict[int, BrokerRegistration]:
        """Every registered broker, by id, in id order."""
        ...

    def get_all_topics(self) -> list[str]:
        """Topic names under /brokers/topics, sorted."""
        ...

    def get_topic_assignment(self, name: str) -> Assignment | None:
        """Partition -> replicas; None when the topic does not exist."""
        ...

    def get_topic_znode(self, name: str) -> tuple[Assignment, uuid.UUID | None, int] | None:
        """(assignment, topic id or None for a pre-KIP-516 znode, zkVersion) of the
        topic's znode; None when the topic does not exist."""
        ...

    def new_topic_id(self, name: str) -> uuid.UUID:
        """An id for a topic that has none (random here; derived from the topic and the
        zxid in the simulator, so its runs stay deterministic)."""
        ...

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[LeaderAndIsr, int]]:
        """(state, zkVersion) of each partition that has a state znode; the others are
        left out (no NoNodeError)."""
        ...

    def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], fence_controller_epoch: bool = False
    ) -> dict[TopicPartition, int | Exception]:
        """Create the state znodes. Per partition: 0, or the exception met:
        ZkVersionConflictError (the state znode exists), ControllerMovedError (fenced),
        NoNodeError (the topic's znode is gone: it is not resurrected)."""
        ...

    def update_partition_states(
        self,
        updates: dict[TopicPartition, tuple[LeaderAndIsr, int]],
        fence_controller_epoch: bool = False,
    ) -> dict[TopicPartition, int | Exception]:
        """Conditional writes, each on its expected zkVersion. Per partition: the new
        zkVersion, or ZkVersionConflictError (stale version), NoNodeError (no state
        znode), ControllerMovedError (fenced); one failure does not stop the others."""
        ...

    def get_topics_marked_for_deletion(self) -> list[str]:
        """Names under /admin/delete_topics, sorted."""
        ...

    def get_isr_change_notifications(self) -> dict[str, list[TopicPartition]]:
        """Pending notification name -> its partitions, in name (sequence) order."""
        ...

    def get_preferred_replica_election(self) -> list[TopicPartition]:
        """The pending election's partitions; [] when none is pending."""
        ...

    def get_partition_reassignment(self) -> dict[TopicPartition, list[int]]:
        """The pending reassignment; {} when none is pending."""
        ...

    def children_or_none(self, path: str) -> list[str] | None:
        """The children of `path`, or None when it does not exist."""
        ...

    def fenced_multi(self, writes: Sequence[ZkWrite]) -> None:
        """All of `writes` in one multi-op behind the /controller_epoch check, or none:
        ControllerMovedError when the epoch moved (or this client never won an
        election), ZkVersionConflictError when a write met a changed znode."""
        ...


class ZooKeeperClient(ControllerZk, Protocol):
    """One ZooKeeper session with every metadata operation brokers, the controller and
    tools share."""

    @property
    def session_id(self) -> int:
        """The session's id: the ephemeralOwner of the znodes it creates."""
        ...

    def close(self) -> None:
        """End the session: its ephemeral znodes and watches go at once."""
        ...

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
        Registering again on the same session returns the same epoch. Raises
        BrokerIdInUseError when another live session holds the id (ZkClient first waits
        up to `stale_wait_s` for a dead predecessor's session to expire; the simulator
        has no dead-but-unexpired sessions and raises at once)."""
        ...

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        """The registration (epoch = czxid), or None when the broker is not registered."""
        ...

    # --- topics ----------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        assignment: Assignment,
        config: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Write the config, then the assignment with the topic id (a new one unless
        given); TopicExistsError if the topic exists. Returns the id."""
        ...

    def set_topic_assignment(
        self, name: str, assignment: Assignment, expected_version: int = -1
    ) -> int:
        """Rewrite the assignment (conditional unless -1); returns the new zkVersion.
        ZkVersionConflictError on a stale version, NoNodeError without the topic."""
        ...

    def get_topic_config(self, name: str) -> dict[str, str]:
        """The topic's overrides; {} when it has none."""
        ...

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        """Replace the overrides and announce `topics/<name>` under /config/changes."""
        ...

    def get_broker_config(self, entity: str) -> dict[str, str]:
        """Dynamic configs of broker `entity` (or of every broker: `<default>`); {} if none."""
        ...

    def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        """Replace /config/brokers/<entity> and announce `brokers/<entity>`."""
        ...

    def get_config_changes(self) -> dict[str, str]:
        """Change notification name -> entity path ("topics/t", "brokers/1"), in order."""
        ...

    # --- partition state -------------------------------------------------------------

    def get_partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None:
        """(state, zkVersion), or None when the partition has no state znode."""
        ...

    def create_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> int:
        """Create the state znode and its parents; returns 0. ZkVersionConflictError when
        it exists already (a create is conditional on absence)."""
        ...

    def update_partition_state(
        self,
        tp: TopicPartition,
        state: LeaderAndIsr,
        expected_version: int,
        fence_controller_epoch: bool = False,
    ) -> int:
        """Conditional write; returns the new zkVersion. Raises what
        update_partition_states would hand back for the partition."""
        ...

    # --- topic deletion --------------------------------------------------------------

    def mark_topic_for_deletion(self, name: str) -> None:
        """Create /admin/delete_topics/<name>; marking twice is not an error."""
        ...

    def delete_topic_znodes(self, name: str) -> None:
        """Remove the assignment, partition states, config and deletion mark; absent
        znodes are skipped."""
        ...

    # --- ISR change notifications ----------------------------------------------------

    def create_isr_change_notification(self, tps: Iterable[TopicPartition]) -> str:
        """A persistent sequential isr_change_<seq>; returns its name."""
        ...

    def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        """Delete these notifications; names already gone are skipped."""
        ...

    # --- admin znodes ----------------------------------------------------------------

    def create_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """Create /admin/reassign_partitions; NodeExistsError while one is pending."""
        ...

    def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None:
        """Rewrite (or create) the znode; an empty reassignment deletes it."""
        ...

    def create_preferred_replica_election(self, tps: Iterable[TopicPartition]) -> None:
        """Create /admin/preferred_replica_election; NodeExistsError while one is pending."""
        ...

    def delete_preferred_replica_election(self) -> None:
        """Delete it; nothing pending is not an error."""
        ...

    # --- producer id blocks ----------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the block after /latest_producer_id_block's: unique across the cluster,
        never reused."""
        ...

    # --- watches ---------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> object:
        """`callback(sorted children)` at registration and after every change; `path` is
        created if missing. Returns the implementation's watch handle."""
        ...

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, ZnodeStatView | None], Any]
    ) -> object:
        """`callback(data, stat)` at registration and after every change of the znode;
        (None, None) while it does not exist. Returns the watch handle."""
        ...
