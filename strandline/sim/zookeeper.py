"""A deterministic, in-memory ZooKeeper for the whole-cluster simulator.

`SimZooKeeper` is the server: a znode tree (data, version, cversion, czxid, mzxid,
pzxid, ephemeral owner), a global zxid, sessions whose expiry deletes their ephemeral
znodes, conditional writes, atomic multi-ops, and persistent data/children watches that
behave like kazoo's `DataWatch` / `ChildrenWatch` recipes. `SimZkClient` is one session
seen through the same methods, arguments, results and errors as
`strandline.coordination.zk_client.ZkClient`, over the same paths and JSON codecs
(`strandline.coordination.znodes`), so controller and broker code can run against either.

Determinism: no threads, no clock (timestamps come from an optional `now_ms` callable,
else 0), no randomness, and no iteration over hash-ordered sets of strings; the same
calls always produce the same zxids, sequence numbers, child orders and notifications.

Watch callbacks never run inside a write. Each firing becomes a `Notification` in a FIFO
that the simulator drains with `SimZooKeeper.take_notifications()` and runs (`.run()`)
when it chooses, possibly much later. A notification reads the znode when it runs, as
kazoo re-reads after a watch event, so changes made in between coalesce into one
callback with the latest state; a data watch is not called again when the znode's mzxid
has not moved (kazoo's DataWatch rule).

Lost replies: `SimZkClient.lose_reply(...)` arms a fault for one of the session's next
requests: it fails before ZooKeeper applies it, or after, and the client sees
ConnectionLoss either way; the session may be expired in between (the reply was lost
because the connection stayed down past the session timeout).

Left out: ACLs and authentication, SUSPENDED states and session
timeouts (the simulator expires sessions explicitly; nothing expires by itself), chroots,
quotas, containers/TTL nodes, `sync`, a session that is dead but not yet expired (so
`register_broker` raises BrokerIdInUseError at once instead of waiting), and kazoo's
re-arming of watch recipes on a new session: here a watch belongs to the session that
registered it and dies with it, and the broker registers its watches again on the new
session. Exceptions raised by callbacks propagate to whoever runs the notification.
"""

from __future__ import annotations

import functools
import random
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, NamedTuple, TypeAlias

from kazoo.exceptions import BadVersionError as KazooBadVersion
from kazoo.exceptions import ConnectionLoss as KazooConnectionLoss
from kazoo.exceptions import NodeExistsError as KazooNodeExists
from kazoo.exceptions import NoNodeError as KazooNoNode
from kazoo.exceptions import NotEmptyError as KazooNotEmpty
from kazoo.exceptions import SessionExpiredError as KazooSessionExpired

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkFailure,
    ZkVersionConflictError,
)
from strandline.coordination.zk_ops import CreateWrite, SetWrite, ZkWrite
from strandline.coordination.znodes import Assignment, BrokerRegistration, LeaderAndIsr
from strandline.coordination.zookeeper_client import ZooKeeperClient
from strandline.storage.producer_state import (
    LATEST_PRODUCER_ID_BLOCK_ZNODE,
    ProducerIdBlock,
    decode_producer_id_block,
    encode_producer_id_block,
    producer_id_block,
)
from strandline.types import TopicPartition

__all__ = [
    "BadVersion",
    "CheckOp",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "MultiFailed",
    "NoChildrenForEphemerals",
    "NoNode",
    "ReplyFault",
    "NodeExists",
    "NotEmpty",
    "Notification",
    "Op",
    "OpResult",
    "SessionExpired",
    "SetOp",
    "SimZkClient",
    "SimZooKeeper",
    "Watch",
    "WatchKind",
    "ZkError",
    "ZnodeStat",
]

# --- errors ------------------------------------------------------------------------


class ZkError(Exception):
    """Base of the simulated server's errors (kazoo's KazooException's role). Each error
    ZooKeeper also raises is kazoo's class too, so the ZooKeeperClient contract's
    `except NoNodeError` etc. catch the simulator's errors as they catch the server's."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {detail}" if detail else path)


class NoNode(ZkError, KazooNoNode):
    """The znode (or, for a create, its parent) does not exist."""


class NodeExists(ZkError, KazooNodeExists):
    """A create found the znode already there."""


class BadVersion(ZkError, KazooBadVersion):
    """A conditional set/delete/check found another version."""


class NotEmpty(ZkError, KazooNotEmpty):
    """A non-recursive delete of a znode that has children."""


class NoChildrenForEphemerals(ZkError):
    """A create under an ephemeral znode (ZooKeeper forbids it)."""


class SessionExpired(ZkError, KazooSessionExpired):
    """The session has expired (or was closed); open a new one and register again."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        super().__init__("", f"session {session_id} has expired")


class ConnectionLoss(ZkError, KazooConnectionLoss):
    """The request's reply was lost: it may or may not have been applied. A kazoo
    ConnectionLoss too, so code shared with the broker catches it the same way."""


class ReplyFault(NamedTuple):
    """A lost reply armed on a session: the request after `skip` others fails."""

    skip: int = 0
    after_apply: bool = False  # applied, then the reply is lost
    expire: bool = False  # the session expires before the client hears anything


def classify_sim_failure(exc: Exception) -> ZkFailure:
    """A simulated failure as the ISR update core sees it (as
    `coordination.errors.classify_zk_failure` does for kazoo's)."""
    if isinstance(exc, BadVersion | ZkVersionConflictError):
        return ZkFailure.BAD_VERSION
    if isinstance(exc, NoNode):
        return ZkFailure.NO_NODE
    if isinstance(exc, SessionExpired):
        return ZkFailure.SESSION_EXPIRED
    return ZkFailure.CONNECTION_LOSS


# --- stats, multi-ops, watches -----------------------------------------------------


class ZnodeStat(NamedTuple):
    """kazoo's ZnodeStat fields, so code reading `stat.version` etc. runs unchanged."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int  # 0 for persistent znodes, as ZooKeeper reports it
    dataLength: int
    numChildren: int
    pzxid: int

    @property
    def owner_session_id(self) -> int | None:
        return self.ephemeralOwner or None

    @property
    def creation_transaction_id(self) -> int:
        return self.czxid

    @property
    def last_modified_transaction_id(self) -> int:
        return self.mzxid

    @property
    def children_count(self) -> int:
        return self.numChildren


class CheckOp(NamedTuple):
    """Multi-op: require `path` at `version` (-1: only that it exists)."""

    path: str
    version: int


class CreateOp(NamedTuple):
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


class SetOp(NamedTuple):
    path: str
    data: bytes
    version: int = -1


class DeleteOp(NamedTuple):
    path: str
    version: int = -1


Op: TypeAlias = CheckOp | CreateOp | SetOp | DeleteOp
# Per op, as kazoo's transaction results: True (check, delete), the created path, the stat.
OpResult: TypeAlias = bool | str | ZnodeStat


class MultiFailed(ZkError):
    """A multi-op failed and changed nothing; `index` and `op` name the op that failed,
    `cause` is what it met (e.g. index 0 BadVersion = the fencing check, not the write)."""

    def __init__(self, index: int, op: Op, cause: ZkError) -> None:
        self.index = index
        self.op = op
        self.cause = cause
        super().__init__(op.path, f"multi op {index} failed: {type(cause).__name__} {cause}")


WatchKind: TypeAlias = Literal["data", "children"]


class Watch:
    """A persistent watch owned by one session (a kazoo DataWatch/ChildrenWatch)."""

    __slots__ = ("session_id", "path", "kind", "callback", "active", "fired", "seen")

    def __init__(
        self, session_id: int, path: str, kind: WatchKind, callback: Callable[..., Any]
    ) -> None:
        self.session_id = session_id
        self.path = path
        self.kind: WatchKind = kind
        self.callback = callback
        self.active = True
        self.fired = False
        # What the last delivered callback saw: mzxid (data) or (czxid, cversion)
        # (children); a firing that would show the same thing again is skipped.
        self.seen: object = None

    def __repr__(self) -> str:
        state = "active" if self.active else "dead"
        return f"Watch({self.kind} {self.path} session={self.session_id} {state})"


class Notification(NamedTuple):
    """One pending watch firing. Run it with `run()`; it reads the znode then."""

    session_id: int
    thunk: Callable[[], None]
    path: str
    kind: WatchKind

    def run(self) -> None:
        self.thunk()


# --- the tree ------------------------------------------------------------------------


class _Znode:
    __slots__ = (
        "data",
        "version",
        "cversion",
        "czxid",
        "mzxid",
        "pzxid",
        "ctime",
        "mtime",
        "owner",
        "children",
    )

    def __init__(self, data: bytes, zxid: int, now: int, owner: int | None) -> None:
        self.data = data
        self.version = 0
        self.cversion = 0
        self.czxid = zxid
        self.mzxid = zxid
        self.pzxid = zxid
        self.ctime = now
        self.mtime = now
        self.owner = owner
        # A dict, not a set: string hashing is salted per process, and child order
        # must be the same on every run.
        self.children: dict[str, None] = {}


def _stat(node: _Znode) -> ZnodeStat:
    return ZnodeStat(
        node.czxid,
        node.mzxid,
        node.ctime,
        node.mtime,
        node.version,
        node.cversion,
        0,
        node.owner or 0,
        len(node.data),
        len(node.children),
        node.pzxid,
    )


def _split(path: str) -> tuple[str, str]:
    """(parent path, child name)."""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def _validate(path: str) -> None:
    if not path.startswith("/") or path.endswith("/") or "//" in path:
        raise ValueError(f"invalid znode path {path!r}")


_Events: TypeAlias = list[tuple[WatchKind, str]]
_Undo: TypeAlias = list[Callable[[], None]]


class SimZooKeeper:
    """The simulated ensemble: one consistent tree, sessions, watches, notifications."""

    def __init__(self, now_ms: Callable[[], int] | None = None, *, bootstrap: bool = True):
        self._now_ms = now_ms
        self._zxid = 0
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0, None)}
        self._next_session = 1
        self._alive: set[int] = set()
        # session -> its ephemeral paths in creation order (expiry deletes in that order).
        self._ephemerals: dict[int, dict[str, None]] = {}
        self._data_watches: dict[str, list[Watch]] = {}
        self._child_watches: dict[str, list[Watch]] = {}
        self._session_watches: dict[int, list[Watch]] = {}
        self._queue: deque[Notification] = deque()
        if bootstrap:
            self.bootstrap()

    def bootstrap(self) -> None:
        """Create the persistent paths every broker's ZkClient.connect ensures."""
        for path in znodes.PERSISTENT_PATHS:
            if path not in self._nodes:
                self.ensure_path(path)

    @property
    def zxid(self) -> int:
        """The zxid of the last committed write."""
        return self._zxid

    def now_ms(self) -> int:
        return self._now_ms() if self._now_ms is not None else 0

    # --- sessions --------------------------------------------------------------------

    def new_session(self) -> int:
        session_id = self._next_session
        self._next_session += 1
        self._alive.add(session_id)
        self._ephemerals[session_id] = {}
        self._session_watches[session_id] = []
        return session_id

    def is_alive(self, session_id: int) -> bool:
        return session_id in self._alive

    def expire(self, session_id: int) -> None:
        """End the session: its watches die, its undelivered notifications are dropped,
        and its ephemeral znodes are deleted in one transaction (ZooKeeper's closeSession),
        firing the other sessions' watches. Expiring a dead session does nothing."""
        if session_id not in self._alive:
            return
        self._alive.discard(session_id)
        for watch in self._session_watches.pop(session_id):
            watch.active = False
            self._registry(watch.kind)[watch.path].remove(watch)
        if any(n.session_id == session_id for n in self._queue):
            self._queue = deque(n for n in self._queue if n.session_id != session_id)
        paths = list(self._ephemerals[session_id])
        events: _Events = []
        if paths:
            zxid = self._zxid + 1
            for path in paths:
                self._delete(path, -1, zxid, events, None)
            self._zxid = zxid
        del self._ephemerals[session_id]
        self._notify(events)

    def _check_session(self, session_id: int) -> None:
        if session_id not in self._alive:
            raise SessionExpired(session_id)

    # --- reads -----------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        return node.data, _stat(node)

    def exists(self, path: str) -> ZnodeStat | None:
        node = self._nodes.get(path)
        return None if node is None else _stat(node)

    def get_children(self, path: str) -> list[str]:
        """Child names in creation order (ZooKeeper's order is unspecified)."""
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        return list(node.children)

    # --- writes ----------------------------------------------------------------------

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        session_id: int | None = None,
    ) -> str:
        """Create a znode; returns its path (with the sequence suffix if `sequence`).

        An ephemeral znode needs the owner's `session_id`. With `makepath`, missing
        parents are created first, each its own write, as kazoo does: they stay even
        when the create itself then fails.
        """
        if session_id is not None:
            self._check_session(session_id)
        if ephemeral and session_id is None:
            raise ValueError("an ephemeral znode needs the owner's session_id")
        _validate(path)
        events: _Events = []
        try:
            if makepath:
                self._make_parents(path, events)
            zxid = self._zxid + 1
            created = self._create(
                path, data, session_id if ephemeral else None, sequence, zxid, events, None
            )
            self._zxid = zxid
            return created
        finally:
            self._notify(events)

    def ensure_path(self, path: str) -> None:
        """Create `path` and its missing parents as persistent empty znodes."""
        if path in self._nodes:
            return
        _validate(path)
        events: _Events = []
        try:
            self._make_parents(path, events)
            zxid = self._zxid + 1
            self._create(path, b"", None, False, zxid, events, None)
            self._zxid = zxid
        finally:
            self._notify(events)

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        events: _Events = []
        node = self._set(path, data, version, self._zxid + 1, events, None)
        self._zxid += 1
        self._notify(events)
        return _stat(node)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a znode; `recursive` deletes its subtree children first, one write per
        znode and ignoring `version`, as kazoo's recursive delete does."""
        if not recursive:
            events: _Events = []
            self._delete(path, version, self._zxid + 1, events, None)
            self._zxid += 1
            self._notify(events)
            return
        if path == "/":
            raise ValueError("the root znode cannot be deleted")
        if path not in self._nodes:
            raise NoNode(path)
        for child in list(self._nodes[path].children):
            self.delete(f"{path}/{child}", recursive=True)
        self.delete(path)

    def multi(self, ops: Sequence[Op], session_id: int | None = None) -> list[OpResult]:
        """Apply `ops` in order as one transaction (one zxid), or none of them.

        Later ops see earlier ones (create then set the same znode). On the first
        failure everything is rolled back and MultiFailed says which op failed; no watch
        fires. Ephemeral creates need `session_id`.
        """
        if session_id is not None:
            self._check_session(session_id)
        zxid = self._zxid + 1
        events: _Events = []
        undo: _Undo = []
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply(op, session_id, zxid, events, undo))
            except ZkError as exc:
                self._roll_back(undo)
                raise MultiFailed(index, op, exc) from None
            except BaseException:
                self._roll_back(undo)
                raise
        if ops:
            self._zxid = zxid
        self._notify(events)
        return results

    def _apply(
        self, op: Op, session_id: int | None, zxid: int, events: _Events, undo: _Undo
    ) -> OpResult:
        if isinstance(op, CheckOp):
            self._check_version(op.path, op.version)
            return True
        if isinstance(op, CreateOp):
            if op.ephemeral and session_id is None:
                raise ValueError("an ephemeral znode needs the owner's session_id")
            _validate(op.path)
            owner = session_id if op.ephemeral else None
            return self._create(op.path, op.data, owner, op.sequence, zxid, events, undo)
        if isinstance(op, SetOp):
            return _stat(self._set(op.path, op.data, op.version, zxid, events, undo))
        if isinstance(op, DeleteOp):
            self._delete(op.path, op.version, zxid, events, undo)
            return True
        raise TypeError(f"not a multi op: {op!r}")

    @staticmethod
    def _roll_back(undo: _Undo) -> None:
        for step in reversed(undo):
            step()

    def _make_parents(self, path: str, events: _Events) -> None:
        parent, _ = _split(path)
        missing: list[str] = []
        while parent not in self._nodes:
            missing.append(parent)
            parent, _ = _split(parent)
        for ancestor in reversed(missing):
            self._create(ancestor, b"", None, False, self._zxid + 1, events, None)
            self._zxid += 1

    # The primitives below check everything before changing anything, so a failed
    # single op leaves the tree untouched; inside a multi they log how to undo.

    def _create(
        self,
        path: str,
        data: bytes,
        owner: int | None,
        sequence: bool,
        zxid: int,
        events: _Events,
        undo: _Undo | None,
    ) -> str:
        parent_path, name = _split(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNode(parent_path)
        if parent.owner is not None:
            raise NoChildrenForEphemerals(parent_path)
        if sequence:
            # ZooKeeper numbers from the parent's cversion, which deletes also bump:
            # numbers only grow, but need not be contiguous.
            suffix = f"{parent.cversion:010d}"
            path += suffix
            name += suffix
        if path in self._nodes:
            raise NodeExists(path)
        node = _Znode(data, zxid, self.now_ms(), owner)
        if undo is not None:
            undo.append(
                partial(self._undo_create, path, parent, name, parent.cversion, parent.pzxid)
            )
        self._nodes[path] = node
        parent.children[name] = None
        parent.cversion += 1
        parent.pzxid = zxid
        if owner is not None:
            self._ephemerals[owner][path] = None
        events.append(("data", path))
        events.append(("children", parent_path))
        return path

    def _undo_create(self, path: str, parent: _Znode, name: str, cversion: int, pzxid: int) -> None:
        node = self._nodes.pop(path)
        del parent.children[name]
        parent.cversion = cversion
        parent.pzxid = pzxid
        if node.owner is not None:
            del self._ephemerals[node.owner][path]

    def _set(
        self,
        path: str,
        data: bytes,
        version: int,
        zxid: int,
        events: _Events,
        undo: _Undo | None,
    ) -> _Znode:
        node = self._check_version(path, version)
        if undo is not None:
            undo.append(
                partial(self._undo_set, node, node.data, node.version, node.mzxid, node.mtime)
            )
        node.data = data
        node.version += 1
        node.mzxid = zxid
        node.mtime = self.now_ms()
        events.append(("data", path))
        return node

    @staticmethod
    def _undo_set(node: _Znode, data: bytes, version: int, mzxid: int, mtime: int) -> None:
        node.data = data
        node.version = version
        node.mzxid = mzxid
        node.mtime = mtime

    def _delete(
        self,
        path: str,
        version: int,
        zxid: int,
        events: _Events,
        undo: _Undo | None,
    ) -> None:
        if path == "/":
            raise ValueError("the root znode cannot be deleted")
        node = self._check_version(path, version)
        if node.children:
            raise NotEmpty(path)
        parent_path, name = _split(path)
        parent = self._nodes[parent_path]
        if undo is not None:
            # The children dict is copied so a rollback restores the listing order too.
            undo.append(
                partial(
                    self._undo_delete,
                    path,
                    node,
                    parent,
                    dict(parent.children),
                    parent.cversion,
                    parent.pzxid,
                )
            )
        del self._nodes[path]
        del parent.children[name]
        parent.cversion += 1
        parent.pzxid = zxid
        if node.owner is not None:
            self._ephemerals[node.owner].pop(path, None)
        events.append(("data", path))
        events.append(("children", path))
        events.append(("children", parent_path))

    def _undo_delete(
        self,
        path: str,
        node: _Znode,
        parent: _Znode,
        children: dict[str, None],
        cversion: int,
        pzxid: int,
    ) -> None:
        self._nodes[path] = node
        parent.children = children
        parent.cversion = cversion
        parent.pzxid = pzxid
        if node.owner is not None:
            self._ephemerals[node.owner][path] = None

    def _check_version(self, path: str, version: int) -> _Znode:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        if version != -1 and version != node.version:
            raise BadVersion(path, f"expected version {version}, found {node.version}")
        return node

    # --- watches and notifications ---------------------------------------------------

    def watch_data(
        self,
        session_id: int,
        path: str,
        callback: Callable[[bytes | None, ZnodeStat | None], Any],
    ) -> Watch:
        """kazoo DataWatch: `callback(data, stat)` once now (queued) and after every
        change of the znode; (None, None) while it does not exist."""
        return self._watch(session_id, path, "data", callback)

    def watch_children(
        self, session_id: int, path: str, callback: Callable[[list[str]], Any]
    ) -> Watch:
        """kazoo ChildrenWatch: `callback(children)` once now (queued) and after every
        change of the child list. Like kazoo's, the watch ends silently when a delivery
        finds the znode gone."""
        return self._watch(session_id, path, "children", callback)

    def unwatch(self, watch: Watch) -> None:
        if not watch.active:
            return
        watch.active = False
        self._registry(watch.kind)[watch.path].remove(watch)
        self._session_watches[watch.session_id].remove(watch)

    def take_notifications(self, session_id: int | None = None) -> list[Notification]:
        """Remove and return the pending notifications in firing order (only those of
        `session_id` if given). Every one taken must eventually be run or discarded;
        running one whose session has since expired does nothing."""
        if session_id is None:
            taken = list(self._queue)
            self._queue.clear()
            return taken
        taken = [n for n in self._queue if n.session_id == session_id]
        if taken:
            self._queue = deque(n for n in self._queue if n.session_id != session_id)
        return taken

    @property
    def pending_notifications(self) -> int:
        return len(self._queue)

    def run_notifications(self, limit: int = 100_000) -> int:
        """Run pending notifications, including those their callbacks cause, until none
        is left; returns how many ran. A convenience for tests and simple schedules."""
        ran = 0
        while self._queue:
            if ran >= limit:
                raise RuntimeError(f"watch callbacks still firing after {limit} notifications")
            self._queue.popleft().run()
            ran += 1
        return ran

    def _registry(self, kind: WatchKind) -> dict[str, list[Watch]]:
        return self._data_watches if kind == "data" else self._child_watches

    def _watch(
        self, session_id: int, path: str, kind: WatchKind, callback: Callable[..., Any]
    ) -> Watch:
        self._check_session(session_id)
        watch = Watch(session_id, path, kind, callback)
        self._registry(kind).setdefault(path, []).append(watch)
        self._session_watches[session_id].append(watch)
        # kazoo calls the function at registration; queued like every firing so the
        # simulator decides when the broker sees it.
        self._queue.append(Notification(session_id, partial(self._deliver, watch), path, kind))
        return watch

    def _notify(self, events: _Events) -> None:
        queue = self._queue
        for kind, path in events:
            watches = (self._data_watches if kind == "data" else self._child_watches).get(path)
            if watches:
                for watch in watches:
                    queue.append(
                        Notification(watch.session_id, partial(self._deliver, watch), path, kind)
                    )

    def _deliver(self, watch: Watch) -> None:
        if not watch.active:
            return
        node = self._nodes.get(watch.path)
        if watch.kind == "data":
            seen: object = None if node is None else node.mzxid
            if watch.fired and seen == watch.seen:
                return
            watch.fired = True
            watch.seen = seen
            if node is None:
                watch.callback(None, None)
            else:
                watch.callback(node.data, _stat(node))
            return
        if node is None:
            self.unwatch(watch)
            return
        seen = (node.czxid, node.cversion)
        if watch.fired and seen == watch.seen:
            return
        watch.fired = True
        watch.seen = seen
        watch.callback(list(node.children))


# --- the client --------------------------------------------------------------------


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
        return self._session_id in self.zk._alive

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
        if self._session_id not in self.zk._alive:
            raise SessionExpired(self._session_id)

    def _node(self, path: str) -> _Znode | None:
        # Reads go straight to the tree: no stat tuple is built when nobody needs one.
        return self.zk._nodes.get(path)

    def _children(self, path: str) -> list[str]:
        node = self.zk._nodes.get(path)
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
            node = self.zk._nodes[path]
            if node.owner == self._session_id:
                # Our own node (a retried registration) keeps its epoch.
                return node.czxid
            raise BrokerIdInUseError(
                f"broker.id {broker_id} is already registered at {path} by another live "
                f"ZooKeeper session (0x{node.owner or 0:x}); is another broker with the "
                "same broker.id running?"
            ) from None
        return self.zk._nodes[path].czxid

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
        if path in self.zk._nodes:
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
        if path in self.zk._nodes:
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
        nodes = self.zk._nodes
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
            if path in self.zk._nodes:
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
