"""Asking the cluster: what each console page shows, as plain dataclasses.

Sources, and why each:

- the Kafka protocol, through the admin client every tool shares
  (strandline.client.admin, with --command-config's TLS/SASL settings): brokers,
  topics, partitions, the leader's watermarks, consumer groups and their committed
  offsets, topic configs (min.insync.replicas) — what any client of any
  Kafka-compatible cluster can see;
- ZooKeeper (`ZkClient`): what the protocol does not show — the controller and its
  epoch, reassignments in progress, and the partition state znodes (leader epoch, ISR)
  the controller and leaders write; when ZooKeeper is given, the ISR and leader shown
  come from there, since a broker's metadata cache can lag the znode by a moment;
- the brokers' metrics endpoints: every replica's LEO and the HW it knows;
- the brokers' state-change.log files (data dir only): the timeline.

Every call blocks (the routes run them in a thread pool) and returns a snapshot; a
source that fails is reported in the snapshot's `errors` rather than failing the page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kio.schema.errors import ErrorCode

from strandline import state_change_log as scl
from strandline.client.admin import (
    AdminClient,
    AdminError,
    AdminSettings,
    BlockingAdmin,
    request,
)
from strandline.client.groups import assignment
from strandline.console.history import History, rates
from strandline.console.messages import MessageQuery, MessagesView, browse
from strandline.console.metrics import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    REQUESTS,
    BrokerScrape,
    Scraper,
)
from strandline.console.sources import ConsoleError, NotFoundError, Sources
from strandline.coordination.zk_client import ZkClient
from strandline.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from strandline.types import PartitionInfo, TopicPartition

# Short: a stopped broker must not hold a page that refreshes every second; whatever
# did not answer in time is shown as unknown, with that reason.
REQUEST_TIMEOUT_S = 3.0
# An HW that does not move while the leader's log is ahead of it, for this long, means
# a replica the ISR still names is not fetching.
HW_STUCK_S = 3.0
# The charts' background sampling: with no page open the history still fills.
SAMPLE_EVERY_S = 5.0
# At start-up: long enough for a busy broker, short enough that a typo fails promptly.
STARTUP_TIMEOUT_S = 8.0
ZK_SESSION_TIMEOUT_MS = 10000
# Topic configs change rarely and DescribeConfigs is the costliest call of a refresh.
CONFIG_TTL_S = 10.0
TIMELINE_LIMIT = 500


# --- snapshots -----------------------------------------------------------------------


@dataclass(frozen=True)
class Broker:
    id: int
    address: str | None
    alive: bool  # registered in ZooKeeper (or, without it, in Metadata)
    controller: bool
    metrics_url: str | None
    # did its metrics endpoint answer just now (None: no endpoint to ask). ZooKeeper
    # keeps a dead broker registered for its session timeout; this does not wait.
    answering: bool | None = None
    not_answering_why: str | None = None


@dataclass(frozen=True)
class Partition:
    """A partition as the console's pages and JSON show it: a `PartitionInfo` (whose
    health rules it copies when built) with the topic's min.insync.replicas and what the
    console found against the ISR."""

    topic: str
    partition: int
    leader: int  # -1: none
    leader_epoch: int | None  # None: ZooKeeper not consulted
    replicas: list[int]
    isr: list[int]
    min_isr: int
    offline: bool
    under_replicated: bool
    under_min_isr: bool
    # Why the ISR above is not the whole truth: members whose broker does not answer,
    # an HW that stopped moving. Empty: nothing known against it.
    problems: tuple[str, ...] = ()
    not_answering: tuple[int, ...] = ()  # ISR members (or the leader) not answering

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def healthy(self) -> bool:
        return not (self.offline or self.under_replicated or self.under_min_isr or self.problems)


@dataclass(frozen=True)
class Alert:
    # under-replicated | offline | under-min-isr | not-answering | hw-stuck |
    # broker-down | broker-not-answering | no-controller | source
    kind: str
    subject: str  # a partition name, "broker 3", or a source
    detail: str
    topic: str | None = None
    brokers: tuple[int, ...] = ()  # the brokers the alert is about


@dataclass(frozen=True)
class AlertGroup:
    """Alerts of one kind, one topic and the same brokers: one row however many
    partitions (a dead broker makes every partition it hosts under-replicated)."""

    kind: str
    topic: str | None
    brokers: tuple[int, ...]
    count: int
    subjects: tuple[str, ...]  # every partition (or broker, or source) in the group
    detail: str  # the first one's


@dataclass
class ClusterView:
    brokers: list[Broker]
    controller: int | None
    controller_epoch: int | None
    partitions: list[Partition]
    alerts: list[Alert]
    errors: list[str]
    taken_at: float  # when gathering started: nothing shown is older, bar what says so
    alert_groups: list[AlertGroup] = field(default_factory=list)
    # broker -> how many partitions each alert kind names it in
    alerts_by_broker: dict[int, dict[str, int]] = field(default_factory=dict)
    # chart title -> (time, value) points over the last minutes
    charts: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


KIND_ORDER = (
    "no-controller",
    "broker-down",
    "broker-not-answering",
    "offline",
    "under-min-isr",
    "not-answering",
    "hw-stuck",
    "under-replicated",
    "source",
)


def group_alerts(alerts: list[Alert]) -> tuple[list[AlertGroup], dict[int, dict[str, int]]]:
    grouped: dict[tuple[str, str | None, tuple[int, ...]], list[Alert]] = {}
    by_broker: dict[int, dict[str, int]] = {}
    for a in alerts:
        grouped.setdefault((a.kind, a.topic, a.brokers), []).append(a)
        if a.topic is not None:
            for b in a.brokers:
                kinds = by_broker.setdefault(b, {})
                kinds[a.kind] = kinds.get(a.kind, 0) + 1
    groups = [
        AlertGroup(
            kind, topic, brokers, len(items), tuple(a.subject for a in items), items[0].detail
        )
        for (kind, topic, brokers), items in grouped.items()
    ]
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    groups.sort(key=lambda g: (rank.get(g.kind, len(rank)), g.topic or "", g.brokers))
    return groups, dict(sorted(by_broker.items()))


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    under_min_isr: int
    internal: bool


@dataclass(frozen=True)
class Replica:
    broker: int
    alive: bool
    leader: bool
    in_isr: bool
    log_start_offset: int | None
    log_end_offset: int | None
    high_watermark: int | None  # as this replica knows it
    error: str | None  # why the numbers are missing or old
    answering: bool | None = None  # its broker's metrics endpoint, just now
    gathered_at: float | None = None  # when the numbers above were read
    fresh: bool = False  # read in this very refresh (else the last ones that worked)
    behind: int | None = None  # the leader's LEO minus this one's, both fresh
    behind_unknown: str | None = None  # why `behind` is None, for a follower
    problems: tuple[str, ...] = ()


@dataclass
class PartitionView:
    partition: Partition
    high_watermark: int | None  # the leader's, over the protocol: what consumers see
    log_start_offset: int | None
    replicas: list[Replica]
    errors: list[str]
    taken_at: float  # when gathering started
    watermarks_at: float | None = None  # when the leader answered ListOffsets
    watermarks_unknown: str | None = None  # why HW / log start are None
    charts: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: list[str]  # "topic-partition"


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    owner: str | None  # member_id


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str
    assignor: str
    coordinator: int | None
    members: list[Member]
    offsets: list[GroupOffset]
    total_lag: int | None
    error: str | None


@dataclass
class GroupsView:
    groups: list[Group]
    errors: list[str]
    taken_at: float


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    current: list[int]
    target: list[int]
    isr: list[int]
    adding: list[int]
    removing: list[int]


@dataclass
class ReassignmentsView:
    reassignments: list[Reassignment]
    available: bool  # False: no ZooKeeper, nothing to read them from
    errors: list[str]
    taken_at: float


@dataclass(frozen=True)
class TimelineFilter:
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    event: str | None = None
    # internal topics (__consumer_offsets, __transaction_state) are hidden unless asked
    # for: their epoch checks would bury everything else
    internal: bool = False

    def query(self, **changes: Any) -> dict[str, str]:
        """The URL query of this filter with `changes` applied."""
        fields = {**self.__dict__, **changes}
        out = {k: str(v) for k, v in fields.items() if v is not None and k != "internal"}
        if fields["internal"]:
            out["internal"] = "1"
        return out


@dataclass
class TimelineView:
    entries: list[dict[str, Any]]  # newest last, as the brokers wrote them
    total: int  # matching entries before the limit
    logs: list[str]
    topic: str | None
    partition: int | None
    errors: list[str]
    taken_at: float
    filter: TimelineFilter = field(default_factory=TimelineFilter)
    # event kind -> entries of it passing every filter but the kind's own
    kinds: dict[str, int] = field(default_factory=dict)
    hidden_internal: int = 0  # entries left out as internal topics'


@dataclass(frozen=True)
class LogDir:
    path: str
    error: str | None  # Kafka's error name; None when the dir is fine
    total_bytes: int | None  # the volume's, None when the broker does not say
    usable_bytes: int | None
    size_bytes: int  # every replica in it
    replicas: int


@dataclass
class BrokerView:
    broker: Broker
    leaders: list[str]  # partitions it leads
    replicas: list[str]  # partitions it hosts a replica of
    under_replicated: list[str]  # of those, the ones whose ISR lacks a replica
    out_of_isr: list[str]  # of those, the ones whose ISR lacks this broker
    log_dirs: list[LogDir]
    log_dirs_unknown: str | None  # why log_dirs is empty
    rates: dict[str, float]  # requests/s per API, bytes in/out and messages in per s
    rates_at: float | None  # when the counters were read
    rates_unknown: str | None
    errors: list[str]
    taken_at: float


@dataclass(frozen=True)
class TopicConfig:
    name: str
    value: str | None  # None: sensitive (not shown) or unset
    source: str  # where the value comes from: topic, broker, default, ...
    sensitive: bool
    read_only: bool


@dataclass
class TopicConfigsView:
    topic: str
    configs: list[TopicConfig]
    acls: AclsView
    errors: list[str]
    taken_at: float


@dataclass(frozen=True)
class AclRow:
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass
class AclsView:
    acls: list[AclRow]
    # why there are none to show: no authorizer (SECURITY_DISABLED), not authorized, ...
    unavailable: str | None
    topic: str | None  # only the ACLs that can apply to this topic
    taken_at: float


# --- helpers -------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionMeta:
    id: int
    leader: int
    replicas: list[int]
    isrs: list[int]


@dataclass(frozen=True)
class TopicMeta:
    partitions: dict[int, PartitionMeta]


@dataclass(frozen=True)
class BrokerMeta:
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMeta:
    """What a Metadata answer says, keyed as the pages look things up."""

    brokers: dict[int, BrokerMeta]
    controller_id: int
    topics: dict[str, TopicMeta]

    @classmethod
    def of(cls, response: Any) -> ClusterMeta:
        return cls(
            brokers={
                int(b.node_id): BrokerMeta(str(b.host), int(b.port)) for b in response.brokers
            },
            controller_id=int(response.controller_id),
            topics={
                str(t.name): TopicMeta(
                    {
                        int(p.partition_index): PartitionMeta(
                            int(p.partition_index),
                            int(p.leader_id),
                            [int(r) for r in p.replica_nodes],
                            [int(r) for r in p.isr_nodes],
                        )
                        for p in t.partitions
                    }
                )
                for t in response.topics
                if t.error_code == ErrorCode.none and t.name is not None
            },
        )


DESCRIBE_CONFIGS, RESOURCE_TOPIC = 32, 2
DESCRIBE_LOG_DIRS = 35
DESCRIBE_ACLS = 29
# DescribeConfigs' config_source codes (KIP-226)
CONFIG_SOURCES = {
    0: "unknown",
    1: "topic",
    2: "broker (dynamic)",
    3: "all brokers (dynamic)",
    4: "broker (server.properties)",
    5: "default",
    6: "broker logger",
}


async def _topic_configs(client: AdminClient, topic: str) -> list[TopicConfig]:
    await client.home()
    v = client.version(DESCRIBE_CONFIGS, 1, 4, "DescribeConfigs")
    response = await client.send(
        request(
            DESCRIBE_CONFIGS,
            v,
            "DescribeConfigsRequest",
            resources=(
                request(
                    DESCRIBE_CONFIGS,
                    v,
                    "DescribeConfigsResource",
                    resource_type=RESOURCE_TOPIC,
                    resource_name=topic,
                    configuration_keys=None,
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )
    )
    [result] = response.results
    if result.error_code != ErrorCode.none:
        raise AdminError(
            f"DescribeConfigs {topic}: {result.error_code.name.upper()}"
            + (f" ({result.error_message})" if result.error_message else "")
        )
    return sorted(
        (
            TopicConfig(
                name=str(c.name),
                value=None if c.is_sensitive or c.value is None else str(c.value),
                source=CONFIG_SOURCES.get(int(c.config_source), str(c.config_source)),
                sensitive=bool(c.is_sensitive),
                read_only=bool(c.read_only),
            )
            for c in result.configs
        ),
        key=lambda c: c.name,
    )


async def _acls(client: AdminClient) -> tuple[list[AclRow], str | None]:
    """Every ACL, or none and why (no authorizer, not authorized)."""
    await client.home()
    v = client.version(DESCRIBE_ACLS, 1, 3, "DescribeAcls")
    response = await client.send(
        request(
            DESCRIBE_ACLS,
            v,
            "DescribeAclsRequest",
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            pattern_type_filter=PatternType.ANY,
            principal_filter=None,
            host_filter=None,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        )
    )
    if response.error_code != ErrorCode.none:
        name = response.error_code.name.upper()
        if response.error_code == ErrorCode.security_disabled:
            return [], f"no authorizer on this cluster ({name}): every client may do anything"
        return [], f"{name}" + (f": {response.error_message}" if response.error_message else "")
    rows = [
        AclRow(
            resource_type=ResourceType.from_code(r.resource_type).name,
            resource_name=str(r.resource_name),
            pattern_type=PatternType.from_code(r.pattern_type).name,
            principal=str(a.principal),
            host=str(a.host),
            operation=AclOperation.from_code(a.operation).name,
            permission=AclPermissionType.from_code(a.permission_type).name,
        )
        for r in response.resources
        for a in r.acls
    ]
    return sorted(rows, key=lambda a: (a.resource_type, a.resource_name, a.principal)), None


def _topic_not_found(topic: str) -> NotFoundError:
    # Metadata leaves out the topics the principal may not describe, as if they did not
    # exist: say both, rather than claim a topic is missing that the ACLs hide.
    return NotFoundError(
        f"topic {topic!r} is not in the cluster's metadata: it does not exist, or the "
        "console's principal is not allowed to describe it"
    )


def _applies_to_topic(acl: AclRow, topic: str) -> bool:
    if acl.resource_type != "TOPIC":
        return False
    if acl.pattern_type == "LITERAL":
        return acl.resource_name in (topic, "*")
    if acl.pattern_type == "PREFIXED":
        return topic.startswith(acl.resource_name)
    return False


async def _log_dirs_of(client: AdminClient, broker: int) -> list[LogDir]:
    """DescribeLogDirs (every topic) at that broker."""
    await client.metadata(())
    v = client.version(DESCRIBE_LOG_DIRS, 1, 4, "DescribeLogDirs")
    response = await client.send(
        request(DESCRIBE_LOG_DIRS, v, "DescribeLogDirsRequest", topics=None), broker
    )
    top = getattr(response, "error_code", ErrorCode.none)
    if top != ErrorCode.none:
        raise AdminError(f"broker {broker} answered {top.name.upper()}")
    out = []
    for result in response.results:
        sizes = [int(p.partition_size) for t in result.topics for p in t.partitions]
        total = int(getattr(result, "total_bytes", -1))
        usable = int(getattr(result, "usable_bytes", -1))
        out.append(
            LogDir(
                path=str(result.log_dir),
                error=None
                if result.error_code == ErrorCode.none
                else result.error_code.name.upper(),
                total_bytes=total if total >= 0 else None,
                usable_bytes=usable if usable >= 0 else None,
                size_bytes=sum(sizes),
                replicas=len(sizes),
            )
        )
    return sorted(out, key=lambda d: d.path)


async def _min_isr_of(client: AdminClient, topics: list[str]) -> dict[str, int]:
    """min.insync.replicas of each topic that answers (a deleted one is left out)."""
    await client.home()
    v = client.version(DESCRIBE_CONFIGS, 1, 4, "DescribeConfigs")
    response = await client.send(
        request(
            DESCRIBE_CONFIGS,
            v,
            "DescribeConfigsRequest",
            resources=tuple(
                request(
                    DESCRIBE_CONFIGS,
                    v,
                    "DescribeConfigsResource",
                    resource_type=RESOURCE_TOPIC,
                    resource_name=t,
                    configuration_keys=("min.insync.replicas",),
                )
                for t in topics
            ),
            include_synonyms=False,
            include_documentation=False,
        )
    )
    out = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            continue
        for config in result.configs:
            if config.name == "min.insync.replicas":
                out[str(result.resource_name)] = _int(config.value, 1)
    return out


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class StuckHighWatermarks:
    """Per partition, since when the leader's HW has not moved while its log is ahead
    of it: some ISR member is not fetching (a paused or cut-off follower stays in the
    ISR for replica.lag.time.max.ms)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def observe(self, tp: tuple[str, int], hw: int, leo: int, now: float) -> float | None:
        """Seconds the HW has been stuck, once that is HW_STUCK_S or more; else None."""
        with self._lock:
            seen = self._seen.get(tp)
            if seen is None or seen[0] != hw or leo <= hw:
                self._seen[tp] = (hw, now)
                return None
            stuck = now - seen[1]
            return stuck if stuck >= HW_STUCK_S else None


class Gatherer:
    """One admin client (the tools' own, on its own event loop thread), one ZooKeeper
    session and one scraper, shared by every request."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        try:
            settings = AdminSettings.from_properties(
                sources.client_config, "strandline-console", REQUEST_TIMEOUT_S
            )
            self.admin = BlockingAdmin(sources.bootstrap, settings)
        except AdminError as exc:
            raise ConsoleError(str(exc)) from exc
        self.zk: ZkClient | None = None
        self.scraper = Scraper(sources.metrics_urls)
        self._configs: dict[str, int] = {}
        self._configs_at = 0.0
        self._configs_lock = threading.Lock()
        # Sources asked side by side within one refresh (a slow one sets the pace, it
        # does not add to it).
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="console-gather")
        # (topic, partition) -> (HW the leader reported, since when it has not moved)
        self._stuck = StuckHighWatermarks()
        self.history = History()
        self._last_cluster = 0.0
        self._stopping = threading.Event()
        self._sampler: threading.Thread | None = None

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> Gatherer:
        """Check every source once, so a typo is one clear line instead of empty pages."""
        try:
            metadata = self._metadata()
        except ConsoleError as exc:
            self.close()
            raise ConsoleError(
                f"cannot reach --bootstrap-server {self.sources.bootstrap}: {exc}"
            ) from exc
        if self.sources.zookeeper:
            zk = ZkClient(
                self.sources.zookeeper,
                session_timeout_ms=ZK_SESSION_TIMEOUT_MS,
                connect_timeout_s=STARTUP_TIMEOUT_S,
            )
            try:
                zk.connect()
            except (KazooTimeoutError, KazooException, OSError, ValueError) as exc:
                zk.close()
                raise ConsoleError(
                    f"cannot reach --zookeeper {self.sources.zookeeper}: "
                    f"{exc or type(exc).__name__}"
                ) from exc
            self.zk = zk
            # A wrong chroot connects fine and shows an empty cluster (every broker
            # "down"): the brokers that answered must be registered there.
            if metadata.brokers and not zk.get_live_brokers():
                self.close()
                raise ConsoleError(
                    f"ZooKeeper {self.sources.zookeeper} has no live brokers registered, "
                    f"though {self.sources.bootstrap} answers: wrong chroot?"
                )
        return self

    def sample_in_background(self) -> Gatherer:
        """Gather the cluster view every SAMPLE_EVERY_S unless a page just did, so the
        charts cover the last minutes even before anyone looks."""

        def run() -> None:
            while not self._stopping.wait(SAMPLE_EVERY_S):
                if time.time() - self._last_cluster < SAMPLE_EVERY_S - 1:
                    continue
                try:
                    self.cluster()
                except ConsoleError:
                    pass  # the pages say why; the chart shows a gap

        self._sampler = threading.Thread(target=run, name="console-sampler", daemon=True)
        self._sampler.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self.admin.close()
        self.scraper.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.zk is not None:
            self.zk.close()
            self.zk = None

    # --- building blocks -------------------------------------------------------------

    def _metadata(self) -> ClusterMeta:
        async def work(client: AdminClient) -> Any:
            return await client.metadata()

        try:
            return ClusterMeta.of(self.admin.do(work))
        except AdminError as exc:
            raise ConsoleError(str(exc)) from exc

    def _min_isr(self, topics: Iterable[str], errors: list[str]) -> dict[str, int]:
        """min.insync.replicas per topic, cached for CONFIG_TTL_S."""
        wanted = set(topics)
        with self._configs_lock:
            if time.monotonic() - self._configs_at > CONFIG_TTL_S:
                self._configs = {}
                self._configs_at = time.monotonic()
            missing = sorted(wanted - self._configs.keys())
            if missing:
                try:
                    self._configs.update(self.admin.call(_min_isr_of(self.admin.client, missing)))
                except AdminError as exc:
                    errors.append(f"topic configs: {exc}")
            return {t: self._configs.get(t, 1) for t in wanted}

    def _zk_state(
        self, tps: list[TopicPartition], errors: list[str]
    ) -> tuple[
        dict[TopicPartition, tuple[int, int, list[int]]],
        set[int] | None,
        dict[int, str],
        int | None,
        int | None,
    ]:
        """(tp -> (leader, leader epoch, isr), live ids, addresses, controller, epoch);
        empty/None where ZooKeeper is absent or did not answer."""
        if self.zk is None:
            return {}, None, {}, None, None
        try:
            states = self.zk.get_partition_states(tps)
            live = self.zk.get_live_brokers()
            controller = self.zk.get_controller()
            epoch = self.zk.get_controller_epoch()
        except (KazooException, KazooTimeoutError) as exc:
            errors.append(f"ZooKeeper: {type(exc).__name__} {exc}".strip())
            return {}, None, {}, None, None
        return (
            {tp: (s.leader, s.leader_epoch, list(s.isr)) for tp, (s, _v) in states.items()},
            set(live),
            {b: f"{r.host}:{r.port}" for b, r in live.items()},
            controller,
            epoch[0] if epoch else None,
        )

    def _scrape_soon(self) -> Future[dict[int, BrokerScrape]]:
        """Every broker's metrics, asked now, read when the caller needs them."""
        return self._pool.submit(self.scraper.scrape)

    def _health(
        self,
        tp: tuple[str, int],
        leader: int,
        isr: list[int],
        scrapes: dict[int, BrokerScrape] | None,
    ) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(problems, silent brokers) of a partition ZooKeeper calls healthy or not: the
        leader or an ISR member whose broker does not answer is flagged at once, not
        after ZooKeeper's session timeout; an HW stuck behind the leader's log end means
        some ISR member is not fetching."""
        if not scrapes:
            return (), ()
        problems: list[str] = []
        silent: list[int] = []
        for b in sorted({*isr, *([leader] if leader >= 0 else [])}):
            scrape = scrapes.get(b)
            if scrape is None or scrape.fresh:
                continue  # no endpoint to ask: unknown, not flagged
            silent.append(b)
            why = scrape.error or "no answer"
            if b == leader:
                problems.append(f"leader not answering: broker {b} ({why})")
            else:
                problems.append(f"broker {b} is in ZooKeeper's ISR but not answering ({why})")
        scrape = scrapes.get(leader)
        gauges = scrape.replicas.get(tp) if scrape is not None and scrape.fresh else None
        if (
            scrape is not None
            and gauges is not None
            and gauges.high_watermark is not None
            and gauges.log_end_offset is not None
            and gauges.high_watermark >= 0
        ):
            stuck = self._stuck.observe(
                tp, gauges.high_watermark, gauges.log_end_offset, scrape.scraped_at or 0.0
            )
            if stuck is not None:
                problems.append(
                    f"HW stuck at {gauges.high_watermark} for {stuck:.0f} s while the "
                    f"leader's log ends at {gauges.log_end_offset}: an ISR member is not "
                    "fetching"
                )
        return tuple(problems), tuple(silent)

    def _partitions(
        self,
        metadata: Any,
        errors: list[str],
        topic: str | None = None,
        scrapes: dict[int, BrokerScrape] | None = None,
    ) -> tuple[list[Partition], set[int], dict[int, str], int | None, int | None]:
        """Every partition (of `topic`, or all), live broker ids, broker addresses, the
        controller and its epoch; with `scrapes`, each partition's problems."""
        listed = [
            (name, p)
            for name, t in metadata.topics.items()
            if topic is None or name == topic
            for p in t.partitions.values()
        ]
        tps = [TopicPartition(name, p.id) for name, p in listed]
        zk_states, zk_live, zk_addresses, zk_controller, epoch = self._zk_state(tps, errors)
        live = zk_live if zk_live is not None else set(metadata.brokers)
        addresses = {b: f"{m.host}:{m.port}" for b, m in metadata.brokers.items()}
        addresses.update(zk_addresses)
        controller = zk_controller if self.zk is not None else metadata.controller_id
        if controller is not None and controller < 0:
            controller = None
        min_isr = self._min_isr({name for name, _ in listed}, errors)
        partitions = []
        for (name, p), tp in zip(listed, tps, strict=True):
            leader, leader_epoch, isr = p.leader, None, list(p.isrs)
            if tp in zk_states:
                leader, leader_epoch, isr = zk_states[tp]
            info = PartitionInfo.of(tp, leader, p.replicas, sorted(isr), live, leader_epoch)
            minimum = min_isr.get(name, 1)
            problems, silent = self._health((name, p.id), leader, isr, scrapes)
            partitions.append(
                Partition(
                    topic=name,
                    partition=p.id,
                    leader=leader,
                    leader_epoch=leader_epoch,
                    replicas=info.replicas,
                    isr=info.isr,
                    min_isr=minimum,
                    offline=info.offline,
                    under_replicated=info.under_replicated,
                    under_min_isr=info.under_min_isr(minimum),
                    problems=problems,
                    not_answering=silent,
                )
            )
        partitions.sort(key=lambda x: (x.topic, x.partition))
        return partitions, live, addresses, controller, epoch

    # --- pages -----------------------------------------------------------------------

    def cluster(self) -> ClusterView:
        started = time.time()
        self._last_cluster = started
        errors: list[str] = []
        scraping = self._scrape_soon()
        metadata = self._metadata()
        scrapes = scraping.result()
        partitions, live, addresses, controller, epoch = self._partitions(
            metadata, errors, scrapes=scrapes
        )
        known = set(self.sources.known_brokers) | set(live) | set(metadata.brokers)
        for p in partitions:
            known.update(p.replicas)
        brokers = []
        for broker_id in sorted(known):
            scrape = scrapes.get(broker_id)
            brokers.append(
                Broker(
                    id=broker_id,
                    address=addresses.get(broker_id),
                    alive=broker_id in live,
                    controller=broker_id == controller,
                    metrics_url=self.sources.metrics_urls.get(broker_id),
                    answering=None if scrape is None else scrape.fresh,
                    not_answering_why=None if scrape is None or scrape.fresh else scrape.error,
                )
            )
        alerts = []
        for b in brokers:
            if not b.alive:
                alerts.append(
                    Alert(
                        "broker-down",
                        f"broker {b.id}",
                        "not registered in ZooKeeper / metadata",
                        brokers=(b.id,),
                    )
                )
            elif b.answering is False:
                alerts.append(
                    Alert(
                        "broker-not-answering",
                        f"broker {b.id}",
                        f"still registered in ZooKeeper, but not answering ({b.not_answering_why})",
                        brokers=(b.id,),
                    )
                )
        for p in partitions:
            missing = tuple(b for b in p.replicas if b not in p.isr)
            if p.offline:
                alerts.append(
                    Alert(
                        "offline",
                        p.name,
                        f"no live leader (leader {p.leader})",
                        p.topic,
                        (p.leader,) if p.leader >= 0 else (),
                    )
                )
            if p.under_replicated:
                alerts.append(
                    Alert(
                        "under-replicated",
                        p.name,
                        f"ISR {_ids(p.isr)} of replicas {_ids(p.replicas)}",
                        p.topic,
                        missing,
                    )
                )
            if p.under_min_isr:
                alerts.append(
                    Alert(
                        "under-min-isr",
                        p.name,
                        f"ISR size {len(p.isr)} < min.insync.replicas {p.min_isr}",
                        p.topic,
                        missing,
                    )
                )
            for problem in p.problems:
                kind = "hw-stuck" if problem.startswith("HW stuck") else "not-answering"
                who = p.not_answering if kind == "not-answering" else ()
                alerts.append(Alert(kind, p.name, problem, p.topic, who))
        if controller is None:
            alerts.append(Alert("no-controller", "controller", "no broker holds /controller"))
        alerts.extend(Alert("source", "data source", e) for e in errors)
        groups, by_broker = group_alerts(alerts)
        fresh = [x for x in scrapes.values() if x.fresh and x.rates]
        if fresh:
            self.history.add(
                "messages in/s", started, sum(x.rates.get(MESSAGES_IN, 0.0) for x in fresh)
            )
        self.history.add("ISR size (all partitions)", started, sum(len(p.isr) for p in partitions))
        for p in partitions:
            self.history.add(f"{p.name}:isr", started, len(p.isr))
            leader = scrapes.get(p.leader)
            gauges = (
                leader.replicas.get((p.topic, p.partition)) if leader and leader.fresh else None
            )
            if gauges is not None and gauges.high_watermark is not None:
                if gauges.high_watermark >= 0 and leader is not None and leader.scraped_at:
                    self.history.add(f"{p.name}:hw", leader.scraped_at, gauges.high_watermark)
        self.history.add(
            "under-replicated partitions", started, sum(p.under_replicated for p in partitions)
        )
        charts = {
            name: self.history.points(name)
            for name in (
                "messages in/s",
                "ISR size (all partitions)",
                "under-replicated partitions",
            )
        }
        return ClusterView(
            brokers=brokers,
            controller=controller,
            controller_epoch=epoch,
            partitions=partitions,
            alerts=alerts,
            errors=errors,
            taken_at=started,
            alert_groups=groups,
            alerts_by_broker=by_broker,
            charts=charts,
        )

    def broker(self, broker_id: int) -> BrokerView:
        started = time.time()
        errors: list[str] = []
        scraping = self._scrape_soon()
        log_dirs = self._pool.submit(self.admin.call, _log_dirs_of(self.admin.client, broker_id))
        metadata = self._metadata()
        scrapes = scraping.result()
        partitions, live, addresses, controller, _epoch = self._partitions(
            metadata, errors, scrapes=scrapes
        )
        known = set(self.sources.known_brokers) | live | set(metadata.brokers)
        for p in partitions:
            known.update(p.replicas)
        if broker_id not in known:
            log_dirs.cancel()
            names = ", ".join(str(b) for b in sorted(known)) or "none"
            raise NotFoundError(f"no broker {broker_id} in the cluster (brokers: {names})")
        scrape = scrapes.get(broker_id)
        broker = Broker(
            id=broker_id,
            address=addresses.get(broker_id),
            alive=broker_id in live,
            controller=broker_id == controller,
            metrics_url=self.sources.metrics_urls.get(broker_id),
            answering=None if scrape is None else scrape.fresh,
            not_answering_why=None if scrape is None or scrape.fresh else scrape.error,
        )
        dirs: list[LogDir] = []
        dirs_unknown = None
        try:
            dirs = log_dirs.result()
        except AdminError as exc:
            dirs_unknown = f"DescribeLogDirs: {exc}"
        rates: dict[str, float] = {}
        rates_unknown = None
        if scrape is None:
            rates_unknown = "no metrics URL for this broker (use --data-dir or --metrics-url)"
        elif not scrape.fresh:
            rates_unknown = f"its metrics endpoint does not answer: {scrape.error}"
        elif not scrape.rates:
            rates_unknown = "measuring: rates need two scrapes a few seconds apart"
        else:
            rates = _named_rates(scrape.rates)
        mine = [p for p in partitions if broker_id in p.replicas]
        return BrokerView(
            broker=broker,
            leaders=[p.name for p in mine if p.leader == broker_id],
            replicas=[p.name for p in mine],
            under_replicated=[p.name for p in mine if p.under_replicated],
            out_of_isr=[p.name for p in mine if broker_id not in p.isr],
            log_dirs=dirs,
            log_dirs_unknown=dirs_unknown,
            rates=rates,
            rates_at=scrape.scraped_at if scrape is not None and rates else None,
            rates_unknown=rates_unknown,
            errors=errors,
            taken_at=started,
        )

    def messages(self, topic: str, partition: int, query: MessageQuery) -> MessagesView:
        self._require_partition(self._metadata(), topic, partition)
        return browse(self.sources.bootstrap, self.sources.client_config, topic, partition, query)

    def _require_partition(self, metadata: ClusterMeta, topic: str, partition: int) -> None:
        if topic not in metadata.topics:
            raise _topic_not_found(topic)
        if partition not in metadata.topics[topic].partitions:
            count = len(metadata.topics[topic].partitions)
            raise NotFoundError(
                f"topic {topic!r} has no partition {partition} (it has {count}: 0..{count - 1})"
            )

    def acls(self, topic: str | None = None) -> AclsView:
        started = time.time()
        try:
            rows, unavailable = self.admin.call(_acls(self.admin.client))
        except AdminError as exc:
            rows, unavailable = [], f"DescribeAcls: {exc}"
        if topic is not None:
            rows = [a for a in rows if _applies_to_topic(a, topic)]
        return AclsView(rows, unavailable, topic, started)

    def topic_configs(self, topic: str) -> TopicConfigsView:
        started = time.time()
        if topic not in self._metadata().topics:
            raise _topic_not_found(topic)
        errors: list[str] = []
        acls = self._pool.submit(self.acls, topic)
        configs: list[TopicConfig] = []
        try:
            configs = self.admin.call(_topic_configs(self.admin.client, topic))
        except AdminError as exc:
            errors.append(str(exc))
        return TopicConfigsView(topic, configs, acls.result(), errors, started)

    def topics(self) -> list[TopicRow]:
        errors: list[str] = []
        partitions, *_ = self._partitions(self._metadata(), errors)
        by_topic: dict[str, list[Partition]] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(p)
        return [
            TopicRow(
                name=name,
                partitions=len(parts),
                replication_factor=max((len(p.replicas) for p in parts), default=0),
                under_replicated=sum(p.under_replicated for p in parts),
                offline=sum(p.offline for p in parts),
                under_min_isr=sum(p.under_min_isr for p in parts),
                internal=name.startswith("__"),
            )
            for name, parts in sorted(by_topic.items())
        ]

    def topic(self, topic: str) -> list[Partition]:
        scraping = self._scrape_soon()
        metadata = self._metadata()
        if topic not in metadata.topics:
            raise _topic_not_found(topic)
        partitions, *_ = self._partitions(metadata, [], topic, scraping.result())
        return partitions

    def partition(self, topic: str, partition: int) -> PartitionView:
        started = time.time()
        errors: list[str] = []
        # Metrics and the leader's watermarks are asked at once, beside Metadata and
        # ZooKeeper: a dead broker costs one timeout, not one per source.
        scraping = self._scrape_soon()
        offsets_errors: list[str] = []
        watermarks = self._pool.submit(self._watermarks, [(topic, partition)], offsets_errors)
        metadata = self._metadata()
        self._require_partition(metadata, topic, partition)
        scrapes = scraping.result()
        partitions, live, *_ = self._partitions(metadata, errors, topic, scrapes)
        [p] = [x for x in partitions if x.partition == partition]
        low, high = watermarks.result().get((topic, partition), (None, None))
        watermarks_at = time.time()
        errors.extend(offsets_errors)
        unknown = None
        if high is None or low is None:
            unknown = offsets_errors[-1] if offsets_errors else "the leader did not give them"
        replicas = [self._replica(b, p, live, scrapes.get(b)) for b in p.replicas]
        replicas = _with_distance(replicas)
        key = f"{topic}-{partition}"
        if high is not None:
            self.history.add(f"{key}:hw", watermarks_at, high)
        self.history.add(f"{key}:isr", started, len(p.isr))
        charts = {
            "records/s (HW growth)": rates(self.history.points(f"{key}:hw")),
            "ISR size": self.history.points(f"{key}:isr"),
        }
        return PartitionView(
            partition=p,
            high_watermark=high,
            log_start_offset=low,
            replicas=replicas,
            errors=errors,
            taken_at=started,
            watermarks_at=watermarks_at if unknown is None else None,
            watermarks_unknown=unknown,
            charts=charts,
        )

    def _replica(
        self, broker: int, p: Partition, live: set[int], scrape: BrokerScrape | None
    ) -> Replica:
        error: str | None = None
        gauges = None
        notes: list[str] = []
        if scrape is None:
            error = "no metrics URL for this broker (use --data-dir or --metrics-url)"
        else:
            gauges = scrape.replicas.get((p.topic, p.partition))
            if scrape.error is not None:
                error = scrape.error
                if gauges is not None and scrape.scraped_at is not None:
                    seen = time.strftime("%H:%M:%S", time.localtime(scrape.scraped_at))
                    error = f"last seen {seen}; now {error}"
            elif gauges is None:
                error = "the broker reports no replica of this partition"
        answering = None if scrape is None else scrape.fresh
        problems = []
        if answering is False and broker in p.isr:
            problems.append(
                "leader not answering"
                if broker == p.leader
                else "in ZooKeeper's ISR but not answering"
            )
        elif answering is False and broker == p.leader:
            problems.append("leader not answering")
        problems.extend(x for x in p.problems if x.startswith("HW stuck") and broker == p.leader)
        if gauges is not None:
            start = _offset(gauges.log_start_offset, "log start", notes)
            end = _offset(gauges.log_end_offset, "LEO", notes)
            hw = _offset(gauges.high_watermark, "HW", notes)
        else:
            start = end = hw = None
        if notes:
            error = "; ".join([*([error] if error else []), *notes])
        return Replica(
            broker=broker,
            alive=broker in live,
            leader=broker == p.leader,
            in_isr=broker in p.isr,
            log_start_offset=start,
            log_end_offset=end,
            high_watermark=hw,
            error=error,
            answering=answering,
            gathered_at=scrape.scraped_at if scrape is not None and gauges is not None else None,
            fresh=bool(scrape is not None and scrape.fresh and gauges is not None),
            problems=tuple(problems),
        )

    def _watermarks(
        self, tps: Iterable[tuple[str, int]], errors: list[str]
    ) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """(earliest, latest) offsets from the leaders; latest is the HW."""
        wanted = list(tps)
        if not wanted:
            return {}
        asked = [TopicPartition(t, p) for t, p in wanted]
        failed: dict[str, dict[TopicPartition, str]] = {"earliest": {}, "latest": {}}

        async def work(client: AdminClient) -> tuple[dict[TopicPartition, int], ...]:
            await client.metadata(sorted({tp.topic for tp in asked}))
            return (
                await client.list_offsets(asked, -2, failed["earliest"]),
                await client.list_offsets(asked, -1, failed["latest"]),
            )

        try:
            earliest, latest = self.admin.do(work)
        except AdminError as exc:
            errors.append(f"ListOffsets: {exc}")
            return {tp: (None, None) for tp in wanted}
        for name, found in failed.items():
            errors.extend(f"{name} offset of {tp}: {why}" for tp, why in sorted(found.items()))
        out = {}
        for tp in asked:
            # A negative answer is a "no offset" sentinel, never an offset to show.
            low, high = earliest.get(tp), latest.get(tp)
            for name, value in (("earliest", low), ("latest", high)):
                if value is not None and value < 0:
                    errors.append(f"{name} offset of {tp}: the leader answered {value}")
            out[(tp.topic, tp.partition)] = (
                low if low is not None and low >= 0 else None,
                high if high is not None and high >= 0 else None,
            )
        return out

    def groups(self) -> GroupsView:
        errors: list[str] = []
        try:
            listed = self.admin.call(self.admin.client.list_groups())
        except AdminError as exc:
            return GroupsView([], [f"ListGroups: {exc}"], time.time())
        ids = sorted({g[0] for g in listed})
        if not ids:
            return GroupsView([], errors, time.time())
        committed: dict[str, dict[tuple[str, int], int]] = {}
        descriptions: dict[str, Any] = {}
        coordinators: dict[str, int] = {}
        failures: dict[str, str] = {}

        async def one(client: AdminClient, group_id: str) -> None:
            coordinators[group_id] = (await client.find_coordinator(group_id))[0]
            descriptions[group_id] = await client.describe(group_id)
            committed[group_id] = {
                (tp.topic, tp.partition): offset
                for tp, offset in (await client.committed(group_id)).items()
            }

        for group_id in ids:
            try:
                self.admin.call(one(self.admin.client, group_id))
            except AdminError as exc:
                failures[group_id] = str(exc)
        assignments = {
            group_id: {
                m.member_id: [(tp.topic, tp.partition) for tp in assignment(d.protocol_type, m)]
                for m in d.members
            }
            for group_id, d in descriptions.items()
        }
        every_tp: set[tuple[str, int]] = set()
        owners: dict[str, dict[tuple[str, int], str]] = {}
        for group_id in descriptions:
            for member_id, tps in assignments[group_id].items():
                for tp in tps:
                    owners.setdefault(group_id, {})[tp] = member_id
            every_tp.update(owners.get(group_id, {}))
            every_tp.update(committed.get(group_id, {}))
        ends = {tp: hw for tp, (_low, hw) in self._watermarks(sorted(every_tp), errors).items()}
        groups = []
        for group_id in ids:
            if group_id in failures:
                groups.append(Group(group_id, "?", "", None, [], [], None, failures[group_id]))
                continue
            d = descriptions[group_id]
            mine = owners.get(group_id, {})
            offsets = []
            for tp in sorted(set(mine) | set(committed.get(group_id, {}))):
                done = committed.get(group_id, {}).get(tp)
                end = ends.get(tp)
                lag = end - done if end is not None and done is not None else None
                offsets.append(GroupOffset(tp[0], tp[1], done, end, lag, mine.get(tp)))
            lags = [o.lag for o in offsets if o.lag is not None]
            groups.append(
                Group(
                    group_id=group_id,
                    state=_state_name(d.group_state),
                    assignor=d.protocol_data or "",
                    coordinator=coordinators.get(group_id),
                    members=[
                        Member(
                            m.member_id,
                            m.client_id,
                            m.client_host,
                            [f"{t}-{p}" for t, p in assignments[group_id][m.member_id]],
                        )
                        for m in d.members
                    ],
                    offsets=offsets,
                    total_lag=sum(lags) if lags else None,
                    error=None,
                )
            )
        return GroupsView(groups, errors, time.time())

    def reassignments(self) -> ReassignmentsView:
        errors: list[str] = []
        if self.zk is None:
            return ReassignmentsView([], False, errors, time.time())
        try:
            pending = self.zk.get_partition_reassignment()
            tps = sorted(pending)
            states = self.zk.get_partition_states(tps)
            assignments = {
                t: self.zk.get_topic_assignment(t) or {} for t in {tp.topic for tp in tps}
            }
        except (KazooException, KazooTimeoutError) as exc:
            errors.append(f"ZooKeeper: {type(exc).__name__} {exc}".strip())
            return ReassignmentsView([], True, errors, time.time())
        rows = []
        for tp in tps:
            target = list(pending[tp])
            current = list(assignments.get(tp.topic, {}).get(tp.partition, []))
            state = states.get(tp)
            rows.append(
                Reassignment(
                    topic=tp.topic,
                    partition=tp.partition,
                    current=current,
                    target=target,
                    isr=sorted(state[0].isr) if state else [],
                    adding=[b for b in target if b not in current],
                    removing=[b for b in current if b not in target],
                )
            )
        return ReassignmentsView(rows, True, errors, time.time())

    def timeline(self, wanted: TimelineFilter | None = None) -> TimelineView:
        f = wanted or TimelineFilter()
        errors: list[str] = []
        data_dir = self.sources.data_dir
        if data_dir is None:
            return TimelineView(
                [],
                0,
                [],
                f.topic,
                f.partition,
                ["no --data-dir: state-change logs unknown"],
                0.0,
                f,
            )
        started = time.time()
        paths = scl.find_logs(data_dir)
        logs = []
        kinds: dict[str, int] = {}
        hidden = 0
        asked_internal = f.internal or (f.topic is not None and _internal(f.topic))
        for source, path in enumerate(paths):
            try:
                entries, skipped = scl.read_log(path, source)
            except scl.MergeError as exc:
                errors.append(str(exc))
                continue
            if skipped is not None:
                errors.append(skipped.describe())
            kept = []
            for e in entries:
                if not scl.matches(e, topic=f.topic, partition=f.partition):
                    continue
                if f.broker is not None and e.broker != f.broker:
                    continue
                if not asked_internal and _internal(str(e.fields.get("topic") or "")):
                    hidden += 1
                    continue
                event = str(e.fields.get("event", "?"))
                kinds[event] = kinds.get(event, 0) + 1
                if f.event is None or event == f.event:
                    kept.append(e)
            logs.append(kept)
        merged = scl.merge(logs)
        return TimelineView(
            entries=[e.fields for e in merged[-TIMELINE_LIMIT:]],
            total=len(merged),
            logs=[str(p) for p in paths],
            topic=f.topic,
            partition=f.partition,
            errors=errors,
            taken_at=started,
            filter=f,
            kinds=dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
            hidden_internal=hidden,
        )


def _named_rates(rates: dict[str, float]) -> dict[str, float]:
    """Counter rates under the names the broker page shows."""
    out = {}
    for key, value in rates.items():
        name, _, request_name = key.partition(":")
        if name == REQUESTS:
            out[f"requests/s {request_name}"] = value
        elif name == BYTES_IN:
            out["bytes in/s"] = value
        elif name == BYTES_OUT:
            out["bytes out/s"] = value
        elif name == MESSAGES_IN:
            out["messages in/s"] = value
    return dict(sorted(out.items()))


def _internal(topic: str) -> bool:
    return topic.startswith("__")


def _offset(value: int | None, what: str, notes: list[str]) -> int | None:
    """An offset, or None (with the reason in `notes`) for a negative sentinel such as
    -1001 (a client library's "invalid offset") or -1."""
    if value is None or value >= 0:
        return value
    notes.append(f"{what} unknown (the broker reported {value}, not an offset)")
    return None


def _with_distance(replicas: list[Replica]) -> list[Replica]:
    """Each follower's distance behind the leader, only from two fresh numbers of the
    same moment; otherwise the reason it is unknown."""
    leader = next((r for r in replicas if r.leader), None)
    out = []
    for r in replicas:
        if r.leader:
            out.append(r)
            continue
        if leader is None:
            out.append(replace(r, behind_unknown="no leader"))
        elif not (leader.fresh and leader.log_end_offset is not None):
            out.append(replace(r, behind_unknown=f"no current LEO from leader {leader.broker}"))
        elif not (r.fresh and r.log_end_offset is not None):
            out.append(replace(r, behind_unknown="no current LEO from this replica"))
        elif r.log_end_offset > leader.log_end_offset:
            out.append(
                replace(
                    r,
                    behind_unknown=(
                        f"its LEO {r.log_end_offset} is past the leader's "
                        f"{leader.log_end_offset}: it truncates on its next fetch"
                    ),
                )
            )
        else:
            out.append(replace(r, behind=leader.log_end_offset - r.log_end_offset))
    return out


def _state_name(state: Any) -> str:
    name = getattr(state, "name", None)
    return str(name if name is not None else state)


def _ids(ids: Iterable[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"
