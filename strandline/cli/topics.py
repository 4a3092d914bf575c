"""`strandline topics`: create, list, describe, alter and delete topics, like kafka-topics.sh.

Everything goes through confluent-kafka's AdminClient (Metadata, CreateTopics,
DescribeConfigs, CreatePartitions, DeleteTopics), so it works against any broker of
any Kafka-compatible cluster, not only a local Strandline one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from rich.markup import escape
from rich.table import Table

from strandline.cli import rdkafka, tool_console
from strandline.client.admin import AdminError, read_properties
from strandline.types import PartitionInfo, TopicPartition

console = tool_console()
err_console = tool_console(stderr=True)

TIMEOUT_S = 30.0
# Long enough for a controller to elect leaders for new partitions, short enough that a
# typo'd --bootstrap-server fails while the user is still watching.
METADATA_TIMEOUT_S = 10.0

ACTIONS = ("--create", "--list", "--describe", "--alter", "--delete")
FILTERS = (
    "--under-replicated-partitions",
    "--unavailable-partitions",
    "--under-min-isr-partitions",
)


class TopicToolError(RuntimeError):
    """Reported to the user as one line, exit code 1."""


def parse_configs(pairs: Iterable[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TopicToolError(f"--config expects key=value, got {pair!r}")
        configs[key.strip()] = value.strip()
    return configs


def read_command_config(path: Path | None) -> dict[str, str]:
    """Kafka's --command-config properties file (read as the shared admin client reads
    it); its security keys (security.protocol, sasl.*, ssl.*) are spelled the same in
    librdkafka."""
    try:
        return read_properties(path)
    except AdminError as e:
        raise TopicToolError(str(e)) from e


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _explain(exc: BaseException, topic: str, *, partitions: int = 0, rf: int = 0) -> str:
    """One line a user can act on, for the errors people actually hit."""
    error = _kafka_error(exc)
    if error is None:
        return str(exc)
    code, detail = error.code(), error.str()
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return f"topic {topic!r} already exists"
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return f"topic {topic!r} does not exist"
    if code == KafkaError.INVALID_REPLICATION_FACTOR:
        return f"invalid replication factor {rf}: {detail}"
    if code == KafkaError.INVALID_PARTITIONS:
        return f"invalid partition count {partitions}: {detail}"
    if code == KafkaError.INVALID_CONFIG:
        return f"invalid topic config: {detail}"
    if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
        return f"no broker answered in time ({detail})"
    return f"{error.name()}: {detail}"


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment: partitions by commas, their replicas by
    colons, e.g. 1:2,2:3,3:1."""
    assignment: list[list[int]] = []
    for part in text.split(","):
        try:
            replicas = [int(r) for r in part.split(":")]
        except ValueError:
            raise TopicToolError(
                f"--replica-assignment {text!r}: expected broker ids like 1:2,2:3"
            ) from None
        if len(set(replicas)) != len(replicas):
            raise TopicToolError(f"--replica-assignment {text!r}: a broker repeats in {part!r}")
        assignment.append(replicas)
    if len({len(r) for r in assignment}) > 1:
        raise TopicToolError(
            f"--replica-assignment {text!r}: every partition needs the same number of replicas"
        )
    return assignment


class Topics:
    """The operations, each one blocking until the cluster has answered."""

    def __init__(self, bootstrap: str, extra: dict[str, str] | None = None) -> None:
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, **(extra or {})}
        self.watch = rdkafka.Watch(bootstrap)
        self.admin = rdkafka.create(AdminClient, self.watch.config(config))

    def _result(self, future: Future[Any], topic: str, **context: int) -> Any:
        try:
            return self.watch.wait(self.admin, future, TIMEOUT_S)
        except KafkaException as e:
            raise TopicToolError(_explain(e, topic, **context)) from e

    def metadata(self) -> Any:
        try:
            return self.watch.call(
                self.admin, lambda t: self.admin.list_topics(timeout=t), METADATA_TIMEOUT_S
            )
        except KafkaException as e:
            raise TopicToolError(_explain(e, "")) from e

    def matching(self, pattern: str) -> list[str]:
        """--topic as kafka-topics reads it: a name, or a regular expression."""
        names = self.metadata().topics
        if pattern in names:
            return [pattern]
        try:
            regex = re.compile(pattern)
        except re.error:
            return []
        return sorted(n for n in names if regex.fullmatch(n))

    def create(
        self,
        topic: str,
        partitions: int | None,
        rf: int | None,
        configs: dict[str, str],
        assignment: list[list[int]] | None = None,
    ) -> None:
        # -1: the broker's num.partitions / default.replication.factor, as Kafka does.
        if assignment is not None:
            new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs)
        else:
            new = NewTopic(topic, partitions or -1, rf or -1, config=configs)
        futures = self.admin.create_topics([new], operation_timeout=TIMEOUT_S)
        self._result(futures[topic], topic, partitions=partitions or -1, rf=rf or -1)

    def names(self, exclude_internal: bool) -> list[str]:
        return sorted(
            name
            for name in self.metadata().topics
            if not (exclude_internal and name.startswith("__"))
        )

    def partitions(self, topic: str | None) -> list[PartitionInfo]:
        """Every partition (of `topic`, or of all topics), offline ones marked against
        the live brokers."""
        metadata = self.metadata()
        if topic is not None and topic not in metadata.topics:
            raise TopicToolError(f"topic {topic!r} does not exist")
        live = set(metadata.brokers)
        infos = [
            PartitionInfo.of(TopicPartition(name, p.id), p.leader, p.replicas, p.isrs, live)
            for name, t in metadata.topics.items()
            if topic is None or name == topic
            for p in t.partitions.values()
        ]
        infos.sort(key=lambda i: i.tp)
        return infos

    def configs(self, topics: Iterable[str]) -> dict[str, dict[str, Any]]:
        """topic -> {name: ConfigEntry}; a topic deleted meanwhile is left out."""
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        if not resources:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for resource, future in self.admin.describe_configs(
            resources, request_timeout=TIMEOUT_S
        ).items():
            try:
                out[resource.name] = self.watch.wait(self.admin, future, TIMEOUT_S)
            except KafkaException as e:
                error = _kafka_error(e)
                if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise TopicToolError(_explain(e, resource.name)) from e
        return out

    def alter(self, topic: str, partitions: int, assignment: list[list[int]] | None) -> None:
        # kafka-topics' --alter --replica-assignment lists every partition; the new ones
        # are its tail.
        current = len(self.metadata().topics[topic].partitions)
        new = assignment[current:] if assignment is not None else None
        wanted = (
            NewPartitions(topic, partitions)
            if new is None
            else NewPartitions(topic, partitions, replica_assignment=new)
        )
        futures = self.admin.create_partitions([wanted], operation_timeout=TIMEOUT_S)
        self._result(futures[topic], topic, partitions=partitions)

    def delete(self, topic: str) -> None:
        # Checked up front so an unknown name gets the same one line as --describe,
        # whatever error code (or timeout) a given broker answers DeleteTopics with.
        if topic not in self.metadata().topics:
            raise TopicToolError(f"topic {topic!r} does not exist")
        futures = self.admin.delete_topics([topic], operation_timeout=TIMEOUT_S)
        self._result(futures[topic], topic)


def _min_isr(entries: dict[str, Any]) -> int:
    entry = entries.get("min.insync.replicas")
    try:
        return int(entry.value) if entry is not None and entry.value is not None else 1
    except ValueError:
        return 1


def _overrides(entries: dict[str, Any]) -> str:
    # Like kafka-topics.sh: only the topic's own settings, not every broker default.
    return ",".join(
        f"{name}={entry.value}"
        for name, entry in sorted(entries.items())
        if _source(entry) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not entry.is_sensitive
    )


def _source(entry: Any) -> int:
    # librdkafka hands back the enum or its plain int depending on the binding's version.
    return int(getattr(entry.source, "value", entry.source))


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def describe(
    tool: Topics,
    topics: list[str] | None,
    under_replicated: bool,
    unavailable: bool,
    under_min_isr: bool,
    output: str = "kafka",
) -> None:
    """kafka-topics --describe: a summary line per topic, then one line per partition
    (`--output table` a table, `--output json` one JSON object)."""
    infos = tool.partitions(None)
    if topics is not None:
        wanted = set(topics)
        infos = [i for i in infos if i.topic in wanted]
    configs = tool.configs(sorted({i.topic for i in infos}))
    filtered = under_replicated or unavailable or under_min_isr
    if filtered:
        infos = [
            i
            for i in infos
            if (under_replicated and i.under_replicated)
            or (unavailable and i.offline)
            or (under_min_isr and i.under_min_isr(_min_isr(configs.get(i.topic, {}))))
        ]
    by_topic: dict[str, list[PartitionInfo]] = {}
    for info in infos:
        by_topic.setdefault(info.topic, []).append(info)
    if output == "json":
        print(
            json.dumps(
                [
                    {
                        "topic": name,
                        "configs": _overrides(configs.get(name, {})),
                        "partitions": [
                            {
                                "partition": p.partition,
                                "leader": p.leader if p.has_leader else None,
                                "replicas": list(p.replicas),
                                "isr": list(p.isr),
                            }
                            for p in parts
                        ],
                    }
                    for name, parts in by_topic.items()
                ]
            )
        )
        return
    if output == "table":
        if infos:
            table = Table("Topic", "Partition", "Leader", "Replicas", "Isr")
            for i in infos:
                leader = str(i.leader) if i.has_leader else "[red]none[/]"
                isr = _ids(i.isr) if not i.under_replicated else f"[yellow]{_ids(i.isr)}[/]"
                table.add_row(escape(i.topic), str(i.partition), leader, _ids(i.replicas), isr)
            console.print(table)
        elif filtered:
            err_console.print("no partitions match")
        return
    # Kafka's lines, plain text so that scripts written for kafka-topics.sh parse them.
    # A filtered describe prints only the matching partitions, as Kafka's does.
    for name, parts in by_topic.items():
        if not filtered:
            rf = max((len(p.replicas) for p in parts), default=0)
            print(
                f"Topic: {name}\tPartitionCount: {len(parts)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {_overrides(configs.get(name, {}))}"
            )
        for i in parts:
            leader = str(i.leader) if i.has_leader else "none"
            print(
                f"\tTopic: {i.topic}\tPartition: {i.partition}\tLeader: {leader}\t"
                f"Replicas: {_ids(i.replicas)}\tIsr: {_ids(i.isr)}"
            )


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


def topics(
    bootstrap_server: str = typer.Option(
        ..., "--bootstrap-server", help="host:port[,host:port] of any broker"
    ),
    create: bool = typer.Option(False, "--create", help="Create --topic"),
    list_: bool = typer.Option(False, "--list", help="List topic names"),
    describe_: bool = typer.Option(
        False, "--describe", help="Partitions with leader, replicas and ISR"
    ),
    alter: bool = typer.Option(False, "--alter", help="Raise --topic's partition count"),
    delete: bool = typer.Option(False, "--delete", help="Delete --topic"),
    topic: str | None = typer.Option(
        None, "--topic", help="Topic name, or a regular expression (not with --create)"
    ),
    partitions: int | None = typer.Option(
        None, "--partitions", help="Partition count (--create: default the broker's)"
    ),
    replication_factor: int | None = typer.Option(
        None, "--replication-factor", help="Replicas per partition (default the broker's)"
    ),
    replica_assignment: str | None = typer.Option(
        None,
        "--replica-assignment",
        help="Brokers of each partition, e.g. 1:2,2:3,3:1 (--create, --alter)",
    ),
    config: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--config", help="Topic setting key=value (repeatable, --create)"
    ),
    if_not_exists: bool = typer.Option(
        False, "--if-not-exists", help="--create: no error if the topic exists"
    ),
    if_exists: bool = typer.Option(
        False, "--if-exists", help="--alter, --delete, --describe: no error if none matches"
    ),
    under_replicated_partitions: bool = typer.Option(
        False, "--under-replicated-partitions", help="Only partitions whose ISR < replicas"
    ),
    unavailable_partitions: bool = typer.Option(
        False, "--unavailable-partitions", help="Only partitions without a live leader"
    ),
    under_min_isr_partitions: bool = typer.Option(
        False, "--under-min-isr-partitions", help="Only partitions whose ISR < min.insync.replicas"
    ),
    exclude_internal: bool = typer.Option(
        False, "--exclude-internal", help="Leave out internal topics (__consumer_offsets, ...)"
    ),
    output: str = typer.Option(
        "kafka", "--output", help="--describe: kafka (kafka-topics.sh's lines), table or json"
    ),
    command_config: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--command-config", help="Client properties file (security settings)"
    ),
) -> None:
    """Create, list, describe, alter and delete topics (kafka-topics.sh)."""
    chosen = [
        flag
        for flag, on in zip(ACTIONS, (create, list_, describe_, alter, delete), strict=True)
        if on
    ]
    if len(chosen) != 1:
        raise _fail(f"give exactly one of {', '.join(ACTIONS)}")
    action = chosen[0]
    filters = under_replicated_partitions or unavailable_partitions or under_min_isr_partitions
    if filters and action != "--describe":
        raise _fail(f"{', '.join(FILTERS)} only go with --describe")
    if output not in ("kafka", "table", "json"):
        raise _fail(f"--output must be kafka, table or json, not {output!r}")
    if action in ("--create", "--alter", "--delete") and not topic:
        raise _fail(f"{action} needs --topic")
    if action == "--alter" and partitions is None:
        raise _fail("--alter needs --partitions")
    if partitions is not None and partitions < 1:
        raise _fail(f"--partitions must be at least 1, not {partitions}")
    if replication_factor is not None and replication_factor < 1:
        raise _fail(f"--replication-factor must be at least 1, not {replication_factor}")
    if replica_assignment is not None and action not in ("--create", "--alter"):
        raise _fail("--replica-assignment only goes with --create or --alter")
    if (
        replica_assignment is not None
        and action == "--create"
        and (partitions or replication_factor)
    ):
        raise _fail("--replica-assignment replaces --partitions and --replication-factor")
    if config and action != "--create":
        raise _fail("--config only goes with --create (use `configs --alter` for a topic's)")
    try:
        assignment = parse_replica_assignment(replica_assignment) if replica_assignment else None
        if action == "--alter" and assignment is not None and len(assignment) != partitions:
            raise TopicToolError(
                f"--replica-assignment lists {len(assignment)} partitions, --partitions "
                f"asks for {partitions}"
            )
        tool = Topics(bootstrap_server, read_command_config(command_config))
        if action == "--create":
            assert topic is not None
            try:
                tool.create(
                    topic, partitions, replication_factor, parse_configs(config), assignment
                )
            except TopicToolError as e:
                if not (if_not_exists and "already exists" in str(e)):
                    raise
            else:
                print(f"Created topic {topic}.")
            return
        if action == "--list":
            names = tool.names(exclude_internal)
            if topic is not None:
                names = [n for n in tool.matching(topic) if n in set(names)]
            for name in names:
                print(name)
            return
        matched = tool.matching(topic) if topic is not None else None
        if matched == [] and not if_exists:
            raise TopicToolError(f"topic {topic!r} does not exist")
        if action == "--describe":
            describe(
                tool,
                matched,
                under_replicated_partitions,
                unavailable_partitions,
                under_min_isr_partitions,
                output,
            )
        elif action == "--alter":
            assert matched is not None and partitions is not None
            for name in matched:
                tool.alter(name, partitions, assignment)
                print(f"Topic {name} now has {partitions} partitions.")
        else:
            assert matched is not None
            for name in matched:
                tool.delete(name)
                print(f"Topic {name} is marked for deletion.")
    except (TopicToolError, rdkafka.ClientError) as e:
        raise _fail(str(e)) from e
