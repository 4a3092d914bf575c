"""`strandline configs`: describe and alter topic and broker configs, like kafka-configs.sh.

    strandline configs --bootstrap-server H:P --entity-type topics --entity-name orders --describe
    strandline configs --bootstrap-server H:P --entity-type brokers --entity-default \\
        --alter --add-config 'log.retention.ms=3600000,log.cleanup.policy=[delete,compact]'

It speaks the Kafka protocol itself (ApiVersions, Metadata, DescribeConfigs,
IncrementalAlterConfigs) through kio rather than through librdkafka, because librdkafka
cannot name the cluster-wide broker default (a BROKER resource with an empty name) that
`--entity-default` needs. As Kafka's AdminClient does, a broker id's configs are asked
of that broker; topics and the broker default of any broker. `AdminSession` is shared
with `strandline log-dirs`.

Users' SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials) go
through confluent-kafka's AdminClient, which salts the password on the client side, so
the password never reaches the broker; `--command-config` is handed to it as is, so
its security keys (security.protocol, sasl.*, ssl.*) work there:

    strandline configs --bootstrap-server H:P --entity-type users --entity-name alice \\
        --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    strandline configs --bootstrap-server H:P --entity-type users --describe
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient as LibrdkafkaAdmin,
)
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import rdkafka, tool_console
from strandline.cli.kafka_text import OUTPUT_HELP, check_output
from strandline.client.admin import (
    DEFAULT_TIMEOUT_S,
    AdminClient,
    AdminError,
    AdminSettings,
    read_properties,
    request,
)
from strandline.security.scram import SCRAM_MECHANISMS, check_iterations

console = tool_console()
err_console = tool_console(stderr=True)

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1

# DescribeConfigs config_source values, as Kafka's tool prints them.
SOURCE_NAMES = {
    0: "UNKNOWN_CONFIG",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3


class ConfigToolError(AdminError):
    """Reported to the user as one line, exit code 1."""


class UnknownEntityError(ConfigToolError):
    """The broker answered UNKNOWN_TOPIC_OR_PARTITION."""


# --- talking to the cluster: the shared admin client (strandline.client.admin) ------


# What --command-config may set: client.id, request.timeout.ms, TLS/SASL.
ClientSettings = AdminSettings


class AdminSession(AdminClient):
    """The admin client once it has found its bootstrap broker and read every topic
    (shared with `strandline log-dirs`)."""

    async def __aenter__(self) -> Self:
        try:
            await self.metadata()
        except BaseException:
            await self.close()
            raise
        return self


def client_settings(command_config: Path | None, client_id: str) -> AdminSettings:
    """The --command-config keys these tools honour: client.id, request.timeout.ms and
    the security settings (security.protocol, ssl.*, sasl.*), as a Kafka client reads
    them; a setting that cannot work is refused in one line."""
    return AdminSettings.from_file(command_config, client_id, DEFAULT_TIMEOUT_S)


# --- the tool ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entity:
    kind: str  # "topics" | "brokers"
    name: str  # topic name, broker id, or "" for the broker default

    @property
    def resource_type(self) -> int:
        return RESOURCE_TOPIC if self.kind == "topics" else RESOURCE_BROKER

    @property
    def broker_id(self) -> int | None:
        """The broker that must answer: a broker id's own configs, else any broker."""
        return int(self.name) if self.kind == "brokers" and self.name else None

    def __str__(self) -> str:
        if self.kind == "topics":
            return f"topic {self.name!r}"
        return f"broker {self.name}" if self.name else "the broker default"

    def heading(self, all_: bool) -> str:
        if self.kind == "brokers" and not self.name:
            return "Default configs for brokers in the cluster are:"
        what = f"topic {self.name}" if self.kind == "topics" else f"broker {self.name}"
        return f"{'All' if all_ else 'Dynamic'} configs for {what} are:"

    def own_source(self) -> int:
        """What `--describe` without `--all` shows: the entity's own dynamic configs."""
        if self.kind == "topics":
            return DYNAMIC_TOPIC_CONFIG
        return DYNAMIC_BROKER_CONFIG if self.name else DYNAMIC_DEFAULT_BROKER_CONFIG


@dataclass(frozen=True)
class Config:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...]


def _explain(entity: Entity, code: ErrorCode, message: str | None) -> str:
    detail = message or code.name
    if code == ErrorCode.unknown_topic_or_partition:
        return f"{entity} does not exist"
    if code == ErrorCode.invalid_config:
        return f"invalid config for {entity}: {detail}"
    if code == ErrorCode.invalid_request:
        return f"invalid request for {entity}: {detail}"
    return f"{code.name.upper()} for {entity}: {detail}"


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's `k1=v1,k2=[v2,v3]`: a comma inside brackets belongs to a list value."""
    pairs, current, depth = [], "", 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ConfigToolError(f"--add-config: unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            pairs.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise ConfigToolError(f"--add-config: unbalanced '[' in {text!r}")
    pairs.append(current)
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ConfigToolError(f"--add-config expects k1=v1,k2=v2, got {pair.strip()!r}")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key] = value
    return configs


def parse_names(text: str, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigToolError(f"{flag} names no config")
    return names


async def describe_entity(session: AdminClient, entity: Entity) -> list[Config]:
    v = session.version(DESCRIBE_CONFIGS, 1, 4, "DescribeConfigs")
    resource = request(
        DESCRIBE_CONFIGS,
        v,
        "DescribeConfigsResource",
        resource_type=entity.resource_type,
        resource_name=entity.name,
        configuration_keys=None,
    )
    response = await session.send(
        request(
            DESCRIBE_CONFIGS,
            v,
            "DescribeConfigsRequest",
            resources=(resource,),
            include_synonyms=True,
            include_documentation=False,
        ),
        entity.broker_id,
    )
    (result,) = response.results
    if result.error_code == ErrorCode.unknown_topic_or_partition:
        raise UnknownEntityError(_explain(entity, result.error_code, result.error_message))
    if result.error_code != ErrorCode.none:
        raise ConfigToolError(_explain(entity, result.error_code, result.error_message))
    return sorted(
        (
            Config(
                str(c.name),
                c.value,
                int(c.config_source),
                bool(c.read_only),
                bool(c.is_sensitive),
                tuple((str(s.name), s.value, int(s.source)) for s in c.synonyms),
            )
            for c in result.configs
        ),
        key=lambda c: c.name,
    )


async def alter_entity(
    session: AdminClient, entity: Entity, add: dict[str, str], delete: list[str]
) -> None:
    v = session.version(INCREMENTAL_ALTER_CONFIGS, 0, 1, "IncrementalAlterConfigs")
    ops = [
        request(
            INCREMENTAL_ALTER_CONFIGS,
            v,
            "AlterableConfig",
            name=k,
            config_operation=OP_SET,
            value=val,
        )
        for k, val in add.items()
    ] + [
        request(
            INCREMENTAL_ALTER_CONFIGS,
            v,
            "AlterableConfig",
            name=k,
            config_operation=OP_DELETE,
            value=None,
        )
        for k in delete
    ]
    resource = request(
        INCREMENTAL_ALTER_CONFIGS,
        v,
        "AlterConfigsResource",
        resource_type=entity.resource_type,
        resource_name=entity.name,
        configs=tuple(ops),
    )
    response = await session.send(
        request(
            INCREMENTAL_ALTER_CONFIGS,
            v,
            "IncrementalAlterConfigsRequest",
            resources=(resource,),
            validate_only=False,
        ),
        entity.broker_id,
    )
    (result,) = response.responses
    if result.error_code != ErrorCode.none:
        raise ConfigToolError(_explain(entity, result.error_code, result.error_message))


def _value(config: Config) -> str:
    if config.sensitive:
        return "(sensitive)"
    return "null" if config.value is None else config.value


def _synonyms(synonyms: Iterable[tuple[str, str | None, int]]) -> str:
    return ", ".join(
        f"{SOURCE_NAMES.get(source, source)}:{name}={'null' if value is None else value}"
        for name, value, source in synonyms
    )


def kafka_lines(entity: Entity, configs: list[Config], all_: bool) -> list[str]:
    """kafka-configs.sh --describe: the heading, then `  name=value sensitive=... synonyms=
    {SOURCE:name=value, ...}` per config, sorted by name; a sensitive value is null, as
    the broker never sends it."""
    shown = configs if all_ else [c for c in configs if c.source == entity.own_source()]
    return [entity.heading(all_)] + [
        f"  {c.name}={'null' if c.sensitive or c.value is None else c.value} "
        f"sensitive={'true' if c.sensitive else 'false'} synonyms={{{_synonyms(c.synonyms)}}}"
        for c in shown
    ]


def config_json(entity: Entity, configs: list[Config], all_: bool) -> dict[str, object]:
    shown = configs if all_ else [c for c in configs if c.source == entity.own_source()]
    return {
        "entity_type": entity.kind,
        "entity_name": entity.name or None,  # None: the cluster-wide broker default
        "configs": [
            {
                "name": c.name,
                "value": None if c.sensitive else c.value,
                "source": SOURCE_NAMES.get(c.source, str(c.source)),
                "read_only": c.read_only,
                "sensitive": c.sensitive,
                "synonyms": [
                    {"name": n, "value": v, "source": SOURCE_NAMES.get(src, str(src))}
                    for n, v, src in c.synonyms
                ],
            }
            for c in shown
        ],
    }


def print_configs(entity: Entity, configs: list[Config], all_: bool) -> None:
    shown = configs if all_ else [c for c in configs if c.source == entity.own_source()]
    console.print(escape(entity.heading(all_)), soft_wrap=True)
    if not shown:
        return
    table = Table("Name", "Value", "Source", "Read-only", "Synonyms")
    for c in shown:
        table.add_row(
            escape(c.name),
            escape(_value(c)),
            SOURCE_NAMES.get(c.source, str(c.source)),
            "yes" if c.read_only else "no",
            escape(_synonyms(c.synonyms)),
        )
    console.print(table)


def resolve_entity(
    entity_type: str | None,
    entity_name: str | None,
    entity_default: bool,
    topic: str | None,
    broker: str | None,
    broker_defaults: bool,
) -> tuple[str, str | None]:
    """(kind, name): name None means every entity of the kind, "" the broker default."""
    shorthands = [
        (flag, kind, name)
        for flag, kind, name, on in (
            ("--topic", "topics", topic, topic is not None),
            ("--broker", "brokers", broker, broker is not None),
            ("--broker-defaults", "brokers", "", broker_defaults),
        )
        if on
    ]
    if shorthands:
        if len(shorthands) > 1 or entity_type or entity_name is not None or entity_default:
            raise ConfigToolError(
                f"{shorthands[0][0]} stands for --entity-type/--entity-name: give one or the other"
            )
        _flag, kind, name = shorthands[0]
    else:
        if entity_type is None:
            raise ConfigToolError("give --entity-type topics|brokers|users (or --topic / --broker)")
        kind = entity_type.strip().lower()
        if kind not in ("topics", "brokers", "users"):
            raise ConfigToolError(
                f"--entity-type must be topics, brokers or users, not {entity_type!r}"
            )
        if entity_name is not None and entity_default:
            raise ConfigToolError("give --entity-name or --entity-default, not both")
        if entity_default and kind != "brokers":
            raise ConfigToolError("--entity-default only goes with --entity-type brokers")
        name = "" if entity_default else entity_name
    if name is not None and kind == "topics" and not name.strip():
        raise ConfigToolError("the topic name is empty")
    if name is not None and kind == "users" and not name.strip():
        raise ConfigToolError("the user name is empty")
    if name and kind == "brokers" and not name.strip().isdigit():
        raise ConfigToolError(f"a broker is named by its id, not {name!r}")
    return kind, name.strip() if name is not None else None


async def run_describe(
    session: AdminSession, kind: str, name: str | None, all_: bool, output: str = "kafka"
) -> None:
    if name is None:
        # Every broker, then the cluster-wide default, as kafka-configs.sh lists them.
        names = (
            sorted(session.topics)
            if kind == "topics"
            else [str(b) for b in sorted(session.brokers)] + [""]
        )
    else:
        names = [name]
    documents = []
    for entity_name in names:
        entity = Entity(kind, entity_name)
        if entity.broker_id is not None:
            session.require_broker(entity.broker_id)
        try:
            configs = await describe_entity(session, entity)
        except UnknownEntityError:
            if name is None:
                continue  # deleted since Metadata listed it
            raise
        if output == "kafka":
            print("\n".join(kafka_lines(entity, configs, all_)))
        elif output == "json":
            documents.append(config_json(entity, configs, all_))
        else:
            print_configs(entity, configs, all_)
    if output == "json":
        print(json.dumps(documents))


async def run_alter(
    session: AdminSession, entity: Entity, add: dict[str, str], delete: list[str]
) -> None:
    if entity.broker_id is not None:
        session.require_broker(entity.broker_id)
    await alter_entity(session, entity, add, delete)
    if entity.kind == "brokers" and not entity.name:
        console.print("Completed updating default config for brokers in the cluster.")
    else:
        what = f"topic {entity.name}" if entity.kind == "topics" else f"broker {entity.name}"
        console.print(f"Completed updating config for {escape(what)}.")


# --- users: SCRAM credentials ------------------------------------------------------

DEFAULT_SCRAM_ITERATIONS = 4096  # kafka-configs.sh's, when a credential names none
# kafka-configs.sh's credential syntax: the password runs to the end, commas included.
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
_CK_MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


@dataclass(frozen=True)
class ScramUpsert:
    mechanism: str
    iterations: int
    password: str


def parse_scram_alterations(
    add: dict[str, str], delete: list[str]
) -> tuple[list[ScramUpsert], list[str]]:
    """`SCRAM-SHA-256=[iterations=8192,password=x]` and deleted mechanism names; only
    SCRAM credentials are user configs here (no user quotas)."""
    unexpected = [k for k in (*add, *delete) if k not in SCRAM_MECHANISMS]
    if unexpected:
        raise ConfigToolError(
            f"only SCRAM credential configs ({', '.join(SCRAM_MECHANISMS)}) can be altered "
            f"for users; unexpected: {', '.join(unexpected)}"
        )
    upserts = []
    for mechanism, value in add.items():
        match = _SCRAM_CREDENTIAL.fullmatch(value)
        if match is None or not match[2]:
            # Never echo the value: it holds the password.
            raise ConfigToolError(
                f"{mechanism}: expected [iterations=N,]password=PASSWORD, e.g. "
                f"{mechanism}=[iterations=8192,password=secret]"
            )
        text = match[1]
        try:
            iterations = DEFAULT_SCRAM_ITERATIONS if text in (None, "-1") else int(text)
        except ValueError:
            raise ConfigToolError(f"{mechanism}: iterations= needs a number") from None
        try:
            check_iterations(SCRAM_MECHANISMS[mechanism], iterations)
        except ValueError as e:
            raise ConfigToolError(str(e)) from None
        upserts.append(ScramUpsert(mechanism, iterations, match[2]))
    return upserts, delete


class ScramUsers:
    """The two user-credential operations, through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str, command_config: Path | None) -> None:
        props = read_properties(command_config)
        # The tool's own timeout, not a librdkafka admin property.
        try:
            self.timeout_s = int(props.pop("request.timeout.ms", DEFAULT_TIMEOUT_S * 1000)) / 1000
        except ValueError as e:
            raise ConfigToolError("request.timeout.ms must be a number of milliseconds") from e
        props.setdefault("client.id", "strandline-configs")
        self.watch = rdkafka.Watch(bootstrap)
        try:
            self.admin = rdkafka.create(
                LibrdkafkaAdmin, self.watch.config({"bootstrap.servers": bootstrap, **props})
            )
        except rdkafka.ClientError as e:
            raise ConfigToolError(str(e)) from e

    def describe(self, name: str | None) -> None:
        try:
            # One future for every user, or one per user named.
            answer = self.admin.describe_user_scram_credentials(
                None if name is None else [name], request_timeout=self.timeout_s
            )
            if isinstance(answer, dict):
                descriptions = [
                    self.watch.wait(self.admin, f, self.timeout_s) for f in answer.values()
                ]
            else:
                found = self.watch.wait(self.admin, answer, self.timeout_s)
                descriptions = [found[user] for user in sorted(found)]
        except KafkaException as e:
            error = _kafka_error(e)
            if name is not None and error is not None and error.code() == 91:
                # RESOURCE_NOT_FOUND: kafka-configs.sh prints nothing; we say so.
                console.print(f"No SCRAM credentials for user-principal {escape(repr(name))}.")
                return
            raise ConfigToolError(_admin_error(e)) from e
        except TimeoutError as e:
            raise ConfigToolError(f"no answer within {self.timeout_s:g} s") from e
        for d in descriptions:
            infos = sorted(d.scram_credential_infos, key=lambda i: i.mechanism.value)
            text = ", ".join(
                f"{_mechanism_name(i.mechanism)}=iterations={i.iterations}" for i in infos
            )
            console.print(
                escape(f"SCRAM credential configs for user-principal '{d.user}' are {text}"),
                soft_wrap=True,
            )

    def alter(self, name: str, upserts: list[ScramUpsert], deletes: list[str]) -> None:
        alterations: list[UserScramCredentialAlteration] = [
            UserScramCredentialDeletion(name, _CK_MECHANISMS[m]) for m in deletes
        ]
        alterations += [
            UserScramCredentialUpsertion(
                name,
                ScramCredentialInfo(_CK_MECHANISMS[u.mechanism], u.iterations),
                u.password.encode("utf-8"),
            )
            for u in upserts
        ]
        try:
            (future,) = self.admin.alter_user_scram_credentials(
                alterations, request_timeout=self.timeout_s
            ).values()
            self.watch.wait(self.admin, future, self.timeout_s)
        except KafkaException as e:
            raise ConfigToolError(f"user {name!r}: {_admin_error(e)}") from e
        except TimeoutError as e:
            raise ConfigToolError(f"no answer within {self.timeout_s:g} s") from e
        console.print(f"Completed updating config for user {escape(name)}.")


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return next((k for k, v in _CK_MECHANISMS.items() if v == mechanism), mechanism.name)


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _admin_error(exc: KafkaException) -> str:
    error = _kafka_error(exc)
    if error is None:
        return str(exc)
    if error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
        return f"no broker answered in time ({error.str()})"
    return f"{error.name()}: {error.str()}"


def run_users(
    bootstrap: str,
    command_config: Path | None,
    name: str | None,
    describe_: bool,
    add_config: str | None,
    delete_config: str | None,
) -> None:
    if describe_:
        ScramUsers(bootstrap, command_config).describe(name)
        return
    assert name is not None
    try:
        add = parse_add_config(add_config) if add_config is not None else {}
    except ConfigToolError:
        # Its message quotes the text, which holds passwords here.
        raise ConfigToolError(
            "--add-config expects SCRAM-SHA-256=[iterations=N,password=P],SCRAM-SHA-512=[...]"
        ) from None
    delete = parse_names(delete_config, "--delete-config") if delete_config is not None else []
    both = sorted(set(add) & set(delete))
    if both:
        raise ConfigToolError(f"{', '.join(both)}: both added and deleted")
    upserts, deletes = parse_scram_alterations(add, delete)
    ScramUsers(bootstrap, command_config).alter(name, upserts, deletes)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


def configs(
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", help="host:port[,host:port] of any broker"
    ),
    describe_: bool = typer.Option(False, "--describe", help="Show the entity's configs"),
    alter: bool = typer.Option(False, "--alter", help="Change the entity's configs"),
    entity_type: str | None = typer.Option(None, "--entity-type", help="topics, brokers or users"),
    entity_name: str | None = typer.Option(
        None, "--entity-name", help="Topic, broker id or user (all of them when left out)"
    ),
    entity_default: bool = typer.Option(
        False, "--entity-default", help="The cluster-wide broker default (brokers only)"
    ),
    topic: str | None = typer.Option(
        None, "--topic", help="Same as --entity-type topics --entity-name"
    ),
    broker: str | None = typer.Option(
        None, "--broker", help="Same as --entity-type brokers --entity-name"
    ),
    broker_defaults: bool = typer.Option(
        False, "--broker-defaults", help="Same as --entity-type brokers --entity-default"
    ),
    all_: bool = typer.Option(
        False, "--all", help="Every config with its source, not only the dynamic ones"
    ),
    add_config: str | None = typer.Option(
        None, "--add-config", help="k1=v1,k2=[v2,v3] to set (--alter)"
    ),
    delete_config: str | None = typer.Option(
        None, "--delete-config", help="k1,k2 to remove, back to the default (--alter)"
    ),
    command_config: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--command-config",
        help="Client properties file (client.id, request.timeout.ms, security settings)",
    ),
    output: str = typer.Option("kafka", "--output", help=f"--describe: {OUTPUT_HELP}"),
) -> None:
    """Describe and alter topic and broker configs and users' SCRAM credentials
    (kafka-configs.sh)."""
    try:
        if not bootstrap_server:
            raise ConfigToolError("--bootstrap-server is required")
        bad_output = check_output(output)
        if bad_output is not None:
            raise ConfigToolError(bad_output)
        if describe_ == alter:
            raise ConfigToolError("give exactly one of --describe, --alter")
        kind, name = resolve_entity(
            entity_type, entity_name, entity_default, topic, broker, broker_defaults
        )
        if describe_:
            if add_config is not None or delete_config is not None:
                raise ConfigToolError("--add-config and --delete-config only go with --alter")
        else:
            if all_:
                raise ConfigToolError("--all only goes with --describe")
            if name is None:
                raise ConfigToolError("--alter needs one entity: --entity-name or --entity-default")
            if add_config is None and delete_config is None:
                raise ConfigToolError("--alter needs --add-config and/or --delete-config")
        if kind == "users":
            if all_:
                raise ConfigToolError("--all does not go with --entity-type users")
            run_users(bootstrap_server, command_config, name, describe_, add_config, delete_config)
            return
        add = parse_add_config(add_config) if add_config is not None else {}
        delete = parse_names(delete_config, "--delete-config") if delete_config is not None else []
        both = sorted(set(add) & set(delete))
        if both:
            raise ConfigToolError(f"{', '.join(both)}: both added and deleted")
        settings = client_settings(command_config, "strandline-configs")
        bootstrap = bootstrap_server

        async def run() -> None:
            async with AdminSession(bootstrap, settings) as session:
                if describe_:
                    await run_describe(session, kind, name, all_, output)
                else:
                    assert name is not None
                    await run_alter(session, Entity(kind, name), add, delete)

        asyncio.run(run())
    except AdminError as e:
        raise _fail(str(e)) from e
