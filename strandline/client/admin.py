"""The one admin client: how every tool of docs/tools.md and the console reach a cluster.

Kafka's tools share one AdminClient; ours share this one. It owns what used to be
written once per tool (docs/security.md): the --command-config properties
(`client.id`, `request.timeout.ms`, and TLS/SASL through `client.security`, so the
`client.properties` of `cluster up --security` works as it is, in librdkafka's or
Java's key names), one connection per broker opened on first use, the bootstrap
broker that answers first, Metadata (brokers, controller, topics, leaders), the API
versions the bootstrap broker speaks, and the retries Kafka's AdminClient makes: to
the controller while it moves (NOT_CONTROLLER) and to a group's or transaction's
coordinator while it moves or loads.

`AdminClient` is asyncio; `BlockingAdmin` runs one on its own event loop thread for
blocking callers (reassign, elect, the console's thread pool). Every failure to reach
or log in to a broker is an `AdminError` whose text is one line for the user.

It sits below the CLI (strandline.cli imports it, never the reverse) so the console
and any later tool build on it without depending on the command line.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from strandline.client.connection import KafkaConnection, KafkaConnectionError
from strandline.client.security import ClientSecurity, SaslLoginError
from strandline.errors import ConfigError
from strandline.protocol.messages import build, request_module
from strandline.types import TopicPartition

T = TypeVar("T")

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
GROUP_KEY, TRANSACTION_KEY = 0, 1
DEFAULT_TIMEOUT_S = 30.0
RETRY_S = 0.2
COORDINATOR_WAIT_S = 15.0
CONTROLLER_WAIT_S = 15.0
ALTER_PARTITION_REASSIGNMENTS = 45

# Answers meaning "ask again, maybe elsewhere": the coordinator is moving or loading
# its partition of __consumer_offsets / __transaction_state.
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    }
)


class AdminError(RuntimeError):
    """A broker could not be reached, logged in to or understood; the text is one line
    for the user (the tools print it and exit 1, the console shows it)."""


def request(api_key: int, version: int, message: str, /, **fields: Any) -> Any:
    """A kio request (or nested message) of one version, from the fields it has."""
    return build(getattr(request_module(api_key, version), message), **fields)


def read_properties(path: Path | None) -> dict[str, str]:
    """Kafka's --command-config: a Java properties file (`key=value`, `#`/`!` comments)."""
    if path is None:
        return {}
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise AdminError(f"cannot read --command-config {path}: {e.strerror}") from e
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise AdminError(f"{path}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class AdminSettings:
    """What a --command-config may set for the admin client."""

    client_id: str = "strandline-admin"
    timeout_s: float = DEFAULT_TIMEOUT_S
    security: ClientSecurity | None = None  # TLS and/or SASL; None for PLAINTEXT
    # The file's keys as given: the few tools still on librdkafka (users' SCRAM
    # credentials, verify-replicas' watermarks) hand them to it.
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        client_id: str = "strandline-admin",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> AdminSettings:
        """As a Kafka client reads them; a setting that cannot work is refused in one line."""
        try:
            security = ClientSecurity.from_config(props)
        except (ValueError, ConfigError) as e:
            raise AdminError(f"--command-config: {e}") from e
        timeout = props.get("request.timeout.ms")
        if timeout is not None:
            if not timeout.strip().isdigit() or int(timeout) == 0:
                raise AdminError(f"request.timeout.ms={timeout!r} is not a positive number")
            timeout_s = int(timeout) / 1000
        return cls(props.get("client.id", client_id), timeout_s, security, dict(props))

    @classmethod
    def from_file(
        cls,
        path: Path | None,
        client_id: str = "strandline-admin",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> AdminSettings:
        return cls.from_properties(read_properties(path), client_id, timeout_s)


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not item.strip():
            continue
        if not host or not port.isdigit():
            raise AdminError(f"--bootstrap-server: {item.strip()!r} is not HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise AdminError("--bootstrap-server is empty")
    return out


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[int, ...]


class AdminClient:
    """Connections to one cluster: the first bootstrap server that answers (`send`
    without a broker), then any broker by id or address, each opened on first use with
    the settings' security. `brokers`, `controller_id`, `topics` and `leaders` are those
    of the last `metadata()`; `api_versions` those of the bootstrap broker."""

    def __init__(self, bootstrap: str, settings: AdminSettings | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.settings = settings or AdminSettings()
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self.topics: dict[str, TopicInfo] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._home: tuple[str, int] | None = None
        # Brokers whose open connection stopped answering (a paused process, a dead
        # host): tried last when choosing the next bootstrap broker.
        self._silent: set[tuple[str, int]] = set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    # --- sending -----------------------------------------------------------------------

    async def send_to(
        self,
        address: tuple[str, int],
        message: Any,
        response_type: type[Any] | None = None,
        who: str = "",
    ) -> Any:
        """To one broker by address; any failure is an AdminError naming it."""
        where = f"{who + ' at ' if who else ''}{address[0]}:{address[1]}"
        timeout = self.settings.timeout_s
        try:
            connection = self._connections.get(address)
            if connection is None or connection.closed:
                connection = await KafkaConnection.open(
                    *address,
                    client_id=self.settings.client_id,
                    timeout=timeout,
                    security=self.settings.security,
                )
                self._connections[address] = connection
            return await connection.send(message, response_type, timeout=timeout)
        except TimeoutError:
            raise AdminError(f"{where} did not answer within {timeout:g} s") from None
        except SaslLoginError as e:
            # A handshake refusal is a mechanism the listener lacks; any later refusal
            # is the credentials.
            what = "" if "SaslHandshake" in str(e) else "invalid credentials: "
            raise AdminError(f"{where}: authentication failed: {what}{e}") from e
        except ConnectionRefusedError as e:
            raise AdminError(f"cannot reach {where}: connection refused") from e
        except socket.gaierror as e:
            raise AdminError(f"cannot reach {where}: unknown host ({e.strerror})") from e
        except (OSError, KafkaConnectionError) as e:
            # A secured listener spoken to in plaintext closes the connection: say what
            # is likely wrong rather than only "closed".
            hint = (
                " (is it a TLS/SASL listener? pass its client settings with --command-config)"
                if self.settings.security is None and "closed" in str(e)
                else ""
            )
            raise AdminError(f"cannot reach {where}: {e}{hint}") from e

    async def home(self) -> tuple[str, int]:
        """The first bootstrap server that answers ApiVersions (whose versions are kept);
        once the bootstrap servers are all down, any broker the last Metadata named."""
        if self._home is not None:
            return self._home
        failures = []
        known = [a for a in self.brokers.values() if a not in self.bootstrap]
        candidates = self.bootstrap + known
        ordered = [a for a in candidates if a not in self._silent] + [
            a for a in candidates if a in self._silent
        ]
        for address in ordered:
            try:
                # v0: the one version every broker answers in a shape we can read.
                response = await self.send_to(
                    address, request(API_VERSIONS, 0, "ApiVersionsRequest")
                )
            except AdminError as e:
                failures.append(str(e))
                continue
            if response.error_code != ErrorCode.none:
                failures.append(f"{address[0]}:{address[1]}: ApiVersions {response.error_code}")
                continue
            self.api_versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            self._home = address
            self._silent.discard(address)
            return address
        raise AdminError("; ".join(failures))

    async def send(
        self,
        message: Any,
        broker_id: int | None = None,
        response_type: type[Any] | None = None,
        read_only: bool = False,
    ) -> Any:
        """To that broker, or to the bootstrap broker that answered (another one if its
        connection broke). A connection still open but silent may be a broker that is
        slow to apply a change: a change is not sent twice; a `read_only` request is
        asked again elsewhere, as a paused broker's silence must not hold up a read."""
        if broker_id is None:
            home = await self.home()
            try:
                return await self.send_to(home, message, response_type)
            except AdminError:
                self._home = None
                if self._connections.get(home) is not None and not self._connections[home].closed:
                    self._silent.add(home)
                    if not read_only:
                        raise
            return await self.send_to(await self.home(), message, response_type)
        self.require_broker(broker_id)
        return await self.send_to(
            self.brokers[broker_id], message, response_type, f"broker {broker_id}"
        )

    def version(self, api_key: int, low: int, high: int, name: str) -> int:
        """The highest version both we (low..high) and the bootstrap broker speak
        (call after `home()` or `metadata()`)."""
        found = self.api_versions.get(api_key)
        if found is None or found[1] < low or found[0] > high:
            raise AdminError(f"the broker does not support {name} v{low}-{high}")
        return min(high, found[1])

    def require_broker(self, broker_id: int) -> None:
        if broker_id not in self.brokers:
            known = ", ".join(str(b) for b in sorted(self.brokers)) or "none"
            raise AdminError(f"broker {broker_id} is not in the cluster (brokers: {known})")

    # --- metadata ----------------------------------------------------------------------

    async def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """Metadata of these topics (None: every topic) from the bootstrap broker; the
        cluster's brokers and controller and the named topics' partitions and leaders
        are kept. Returns the response."""
        await self.home()
        v = self.version(METADATA, 1, 12, "Metadata")
        wanted = (
            None
            if topics is None
            else tuple(
                request(METADATA, v, "MetadataRequestTopic", name=t, topic_id=uuid_zero)
                for t in topics
            )
        )
        response = await self.send(
            request(
                METADATA,
                v,
                "MetadataRequest",
                topics=wanted,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
            read_only=True,
        )
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        self.controller_id = int(response.controller_id)
        if topics is None:
            self.topics.clear()
        for t in response.topics:
            if t.error_code != ErrorCode.none or t.name is None:
                continue
            partitions = tuple(sorted(int(p.partition_index) for p in t.partitions))
            self.topics[str(t.name)] = TopicInfo(str(t.name), partitions)
            for p in t.partitions:
                self.leaders[TopicPartition(str(t.name), int(p.partition_index))] = int(p.leader_id)
        return response

    async def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        errors: dict[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader (as the last `metadata()` named it): -2
        earliest, -1 latest, else by time (a time past the last record answers -1). A
        partition without a live leader or answering an error is left out (and, with
        `errors`, said why there)."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        out: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            if leader not in self.brokers:
                if errors is not None:
                    errors.update(dict.fromkeys(tps, f"no live leader (leader {leader})"))
                continue
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            message = request(
                2,
                7,
                "ListOffsetsRequest",
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    request(
                        2,
                        7,
                        "ListOffsetsTopic",
                        name=name,
                        partitions=tuple(
                            request(
                                2,
                                7,
                                "ListOffsetsPartition",
                                partition_index=p,
                                current_leader_epoch=-1,
                                timestamp=timestamp,
                            )
                            for p in ps
                        ),
                    )
                    for name, ps in topics.items()
                ),
            )
            try:
                response = await self.send_to(self.brokers[leader], message, who=f"broker {leader}")
            except AdminError as e:
                if errors is None:
                    raise
                errors.update(dict.fromkeys(tps, str(e)))
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == ErrorCode.none:
                        out[tp] = int(p.offset)
                    elif errors is not None:
                        errors[tp] = ErrorCode(p.error_code).name.upper()
        return out

    # --- the controller and coordinators -----------------------------------------------

    async def send_to_controller(self, message: Any, wait_s: float = CONTROLLER_WAIT_S) -> Any:
        """To the controller Metadata names, again while it moves (NOT_CONTROLLER or no
        controller yet), as Kafka's AdminClient does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            await self.metadata(())
            if self.controller_id in self.brokers:
                response = await self.send(message, self.controller_id)
                if getattr(response, "error_code", ErrorCode.none) != ErrorCode.not_controller:
                    return response
            if loop.time() > deadline:
                raise AdminError(f"no controller answered within {wait_s:g} s")
            await asyncio.sleep(RETRY_S)

    async def alter_partition_reassignments(
        self, wanted: Mapping[TopicPartition, list[int] | None]
    ) -> tuple[ErrorCode, str | None, dict[TopicPartition, tuple[ErrorCode, str | None]]]:
        """AlterPartitionReassignments (KIP-455) at the controller; a None target cancels
        that partition's move. (top-level error, its message, per-partition answers)."""
        by_topic: dict[str, list[Any]] = {}
        for tp, replicas in sorted(wanted.items()):
            by_topic.setdefault(tp.topic, []).append(
                request(
                    ALTER_PARTITION_REASSIGNMENTS,
                    0,
                    "ReassignablePartition",
                    partition_index=tp.partition,
                    replicas=None if replicas is None else tuple(replicas),
                )
            )
        alter = request(
            ALTER_PARTITION_REASSIGNMENTS,
            0,
            "AlterPartitionReassignmentsRequest",
            timeout=datetime.timedelta(seconds=self.settings.timeout_s),
            topics=tuple(
                request(
                    ALTER_PARTITION_REASSIGNMENTS,
                    0,
                    "ReassignableTopic",
                    name=name,
                    partitions=tuple(parts),
                )
                for name, parts in by_topic.items()
            ),
        )
        response = await self.send_to_controller(alter)
        answers = {
            TopicPartition(t.name, int(p.partition_index)): (p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }
        return response.error_code, response.error_message, answers

    async def find_coordinator(
        self, key: str, key_type: int = GROUP_KEY, wait_s: float = COORDINATOR_WAIT_S
    ) -> tuple[int, tuple[str, int]]:
        """(node id, address) of a group's (key type 0) or transactional id's (1)
        coordinator; retried while it is being created, moves or loads."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        await self.home()
        v = self.version(FIND_COORDINATOR, 1, 3, "FindCoordinator")
        kind = "group" if key_type == GROUP_KEY else "transactional id"
        while True:
            response = await self.send(
                request(FIND_COORDINATOR, v, "FindCoordinatorRequest", key=key, key_type=key_type)
            )
            error = ErrorCode(response.error_code)
            if error is ErrorCode.none:
                return int(response.node_id), (str(response.host), int(response.port))
            if error not in COORDINATOR_RETRIABLE or loop.time() > deadline:
                raise AdminError(f"no coordinator for {kind} {key!r}: {error.name.upper()}")
            await asyncio.sleep(RETRY_S)

    async def at_coordinator(
        self,
        key: str,
        message: Any,
        error_of: Callable[[Any], int],
        key_type: int = GROUP_KEY,
        retriable: frozenset[ErrorCode] = COORDINATOR_RETRIABLE,
        wait_s: float = COORDINATOR_WAIT_S,
        response_type: type[Any] | None = None,
    ) -> Any:
        """Send to the key's coordinator, again (finding it anew) while the answer says it
        is moving or loading; the last answer is returned as it is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            _node, address = await self.find_coordinator(key, key_type, wait_s)
            response = await self.send_to(address, message, response_type)
            if ErrorCode(error_of(response)) not in retriable or loop.time() > deadline:
                return response
            await asyncio.sleep(RETRY_S)

    # --- consumer groups (kafka-consumer-groups.sh, the console) ---------------------

    async def list_groups(self) -> list[tuple[str, str, str, int]]:
        """(group id, protocol type, state, coordinator) of every group: ListGroups on
        every broker, each answering for the groups it coordinates."""
        await self.metadata([])
        found = []
        for broker_id, address in sorted(self.brokers.items()):
            response = await self.send_to(
                address, request(16, 4, "ListGroupsRequest", states_filter=())
            )
            if response.error_code != ErrorCode.none:
                raise AdminError(
                    f"broker {broker_id}: ListGroups failed with "
                    f"{ErrorCode(response.error_code).name}"
                )
            found += [
                (g.group_id, g.protocol_type, g.group_state, broker_id) for g in response.groups
            ]
        return sorted(found)

    async def _at_coordinator(
        self, group: str, message: Any, error_of: Callable[[Any], int]
    ) -> Any:
        return await self.at_coordinator(group, message, error_of)

    async def describe(self, group: str) -> Any:
        response = await self._at_coordinator(
            group,
            request(
                15, 5, "DescribeGroupsRequest", groups=(group,), include_authorized_operations=False
            ),
            lambda r: r.groups[0].error_code,
        )
        (described,) = response.groups
        if described.error_code != ErrorCode.none:
            raise AdminError(f"DescribeGroups {group!r}: {ErrorCode(described.error_code).name}")
        return described

    async def committed(self, group: str) -> dict[TopicPartition, int]:
        response = await self._at_coordinator(
            group,
            request(9, 7, "OffsetFetchRequest", group_id=group, topics=None, require_stable=False),
            lambda r: r.error_code,
        )
        if response.error_code != ErrorCode.none:
            raise AdminError(f"OffsetFetch {group!r}: {ErrorCode(response.error_code).name}")
        return {
            TopicPartition(t.name, p.partition_index): int(p.committed_offset)
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    async def commit(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        _node, address = await self.find_coordinator(group)
        topics: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append((tp.partition, offset))
        message = request(
            8,
            7,
            "OffsetCommitRequest",
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(
                request(
                    8,
                    7,
                    "OffsetCommitRequestTopic",
                    name=name,
                    partitions=tuple(
                        request(
                            8,
                            7,
                            "OffsetCommitRequestPartition",
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in ps
                    ),
                )
                for name, ps in topics.items()
            ),
        )
        response = await self.send_to(address, message)
        failed = [
            f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
            for t in response.topics
            for p in t.partitions
            if p.error_code != ErrorCode.none
        ]
        if failed:
            raise AdminError("OffsetCommit failed for " + ", ".join(failed))

    async def delete_group(self, group: str) -> ErrorCode:
        response = await self._at_coordinator(
            group,
            request(42, 2, "DeleteGroupsRequest", groups_names=(group,)),
            lambda r: r.results[0].error_code,
        )
        return ErrorCode(response.results[0].error_code)

    async def delete_offsets(
        self, group: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (47) at the group's coordinator: the group's error, else one error
        per partition."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        message = request(
            47,
            0,
            "OffsetDeleteRequest",
            group_id=group,
            topics=tuple(
                request(
                    47,
                    0,
                    "OffsetDeleteRequestTopic",
                    name=name,
                    partitions=tuple(
                        request(47, 0, "OffsetDeleteRequestPartition", partition_index=p)
                        for p in ps
                    ),
                )
                for name, ps in by_topic.items()
            ),
        )
        response = await self._at_coordinator(group, message, lambda r: r.error_code)
        return ErrorCode(response.error_code), {
            TopicPartition(t.name, int(p.partition_index)): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
        }


def run(bootstrap: str, settings: AdminSettings, work: Callable[[AdminClient], Awaitable[T]]) -> T:
    """`work(client)` on a fresh AdminClient, from blocking code."""

    async def go() -> T:
        async with AdminClient(bootstrap, settings) as client:
            return await work(client)

    return asyncio.run(go())


class BlockingAdmin:
    """An AdminClient for blocking callers, callable from any thread: it lives on its own
    event loop in a daemon thread (connections are kept between calls)."""

    def __init__(self, bootstrap: str, settings: AdminSettings | None = None) -> None:
        self.client = AdminClient(bootstrap, settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="strandline-admin", daemon=True
        )
        self._thread.start()

    @property
    def settings(self) -> AdminSettings:
        return self.client.settings

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def do(self, work: Callable[[AdminClient], Awaitable[T]]) -> T:
        async def go() -> T:
            return await work(self.client)

        return self.call(go())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self.call(self.client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> BlockingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
