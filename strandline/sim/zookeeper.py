"""A deterministic, in-memory ZooKeeper for the whole-cluster simulator.

`SimZooKeeper` is the server: a znode tree (data, version, cversion, czxid, mzxid,
pzxid, ephemeral owner), a global zxid, sessions whose expiry deletes their ephemeral
znodes, conditional writes, atomic multi-ops, and persistent data/children watches that
behave like kazoo's `DataWatch` / `ChildrenWatch` recipes. The client, one session with
`ZkClient`'s metadata operations and lost replies, is `sim/zk_client.py:SimZkClient`.

Determinism: no threads, no clock (timestamps come from an optional `now_ms` callable,
else 0), no randomness, and no iteration over hash-ordered sets of strings; the same
calls always produce the same zxids, sequence numbers, child orders and notifications.

Watch callbacks never run inside a write. Each firing becomes a `Notification` in a FIFO
that the simulator drains with `SimZooKeeper.take_notifications()` and runs (`.run()`)
when it chooses, possibly much later. A notification reads the znode when it runs, as
kazoo re-reads after a watch event, so changes made in between coalesce into one
callback with the latest state; a data watch is not called again when the znode's mzxid
has not moved (kazoo's DataWatch rule).

Left out: ACLs and authentication, SUSPENDED states and session
timeouts (the simulator expires sessions explicitly; nothing expires by itself), chroots,
quotas, containers/TTL nodes, `sync`, a session that is dead but not yet expired (so
`register_broker` raises BrokerIdInUseError at once instead of waiting), and kazoo's
re-arming of watch recipes on a new session: here a watch belongs to the session that
registered it and dies with it, and the broker registers its watches again on the new
session. Exceptions raised by callbacks propagate to whoever runs the notification.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
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
    ZkFailure,
    ZkVersionConflictError,
)

__all__ = [
    "BadVersion",
    "CheckOp",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "MultiFailed",
    "NoChildrenForEphemerals",
    "NoNode",
    "NodeExists",
    "NotEmpty",
    "Notification",
    "Op",
    "OpResult",
    "SessionExpired",
    "SetOp",
    "SimZooKeeper",
    "Watch",
    "WatchKind",
    "ZkError",
    "Znode",
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


class Znode:
    """One znode of the tree (the client reads it as it is, no stat tuple built)."""

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


def _stat(node: Znode) -> ZnodeStat:
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
        self._nodes: dict[str, Znode] = {"/": Znode(b"", 0, 0, None)}
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

    @property
    def nodes(self) -> Mapping[str, Znode]:
        """The tree by path, read-only: the client reads straight from it (no stat tuple
        is built when nobody needs one)."""
        return self._nodes

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
        node = Znode(data, zxid, self.now_ms(), owner)
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

    def _undo_create(self, path: str, parent: Znode, name: str, cversion: int, pzxid: int) -> None:
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
    ) -> Znode:
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
    def _undo_set(node: Znode, data: bytes, version: int, mzxid: int, mtime: int) -> None:
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
        node: Znode,
        parent: Znode,
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

    def _check_version(self, path: str, version: int) -> Znode:
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
