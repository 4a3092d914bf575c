"""`strandline acls`: add, remove and list ACLs, like kafka-acls.sh.

    strandline acls --bootstrap-server H:P --command-config admin.properties \\
        --add --allow-principal User:alice --operation Read --operation Describe --topic orders
    strandline acls --bootstrap-server H:P --list --topic orders --resource-pattern-type match
    strandline acls --bootstrap-server H:P --remove --force --topic orders

Through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls), so it
manages any Kafka cluster's ACLs; --command-config carries the librdkafka security
settings (security.protocol, sasl.*, ssl.*), spelled as in Kafka. The flags, their
defaults (--operation All, hosts `*`) and the printed lines are kafka-acls.sh's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter as CkAclBindingFilter
from confluent_kafka.admin import AclOperation as CkAclOperation
from confluent_kafka.admin import AclPermissionType as CkAclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as CkResourcePatternType
from confluent_kafka.admin import ResourceType as CkResourceType
from kio.schema.errors import ErrorCode
from rich.markup import escape

from strandline.cli import rdkafka, tool_console
from strandline.cli.topics import TopicToolError, read_command_config
from strandline.client.admin import AdminError, AdminSettings, request
from strandline.client.admin import run as run_admin
from strandline.security.acl import (
    ANY_ENTRY,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strandline.security.principal import KafkaPrincipal

err_console = tool_console(stderr=True)

TIMEOUT_S = 30.0
ACTIONS = ("--add", "--remove", "--list")


class AclToolError(RuntimeError):
    """Reported to the user as one line, exit code 1."""


# --- what the flags ask for (pure) -------------------------------------------------


@dataclass
class Flags:
    add: bool = False
    remove: bool = False
    list_: bool = False
    allow_principals: list[str] = field(default_factory=list)
    deny_principals: list[str] = field(default_factory=list)
    allow_hosts: list[str] = field(default_factory=list)
    deny_hosts: list[str] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    cluster: bool = False
    transactional_ids: list[str] = field(default_factory=list)
    pattern_type: str = "literal"
    list_principals: list[str] = field(default_factory=list)
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False


@dataclass(frozen=True)
class Plan:
    action: str  # one of ACTIONS
    # Resource filter -> the entries to add or remove (empty on --remove: all of them).
    # On --add every filter is a concrete pattern.
    acls: dict[ResourcePatternFilter, frozenset[AccessControlEntry]]
    list_principals: tuple[str, ...] = ()


def _principals(texts: Iterable[str], flag: str) -> set[str]:
    out: set[str] = set()
    for text in texts:
        try:
            out.add(str(KafkaPrincipal.parse(text.strip())))
        except ValueError as e:
            raise AclToolError(f"{flag}: {e}") from e
    return out


def _operations(texts: Iterable[str]) -> set[AclOperation]:
    out: set[AclOperation] = set()
    for text in texts:
        op = AclOperation.from_name(text)
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            valid = ", ".join(o.pascal_name for o in AclOperation if o > AclOperation.ANY)
            raise AclToolError(f"--operation: unknown operation {text!r} (one of {valid})")
        out.add(op)
    return out


def _entries(
    flags: Flags, operations: set[AclOperation], deny_too: bool = True
) -> frozenset[AccessControlEntry]:
    """kafka-acls' getAcl: principals x operations x hosts, hosts defaulting to `*`."""
    allowed = _principals(flags.allow_principals, "--allow-principal")
    denied = _principals(flags.deny_principals, "--deny-principal") if deny_too else set()
    allow_hosts = {h.strip() for h in flags.allow_hosts} or ({"*"} if allowed else set())
    deny_hosts = {h.strip() for h in flags.deny_hosts} or ({"*"} if denied else set())
    return frozenset(
        AccessControlEntry(p, h, op, permission)
        for principals, hosts, permission in (
            (allowed, allow_hosts, AclPermissionType.ALLOW),
            (denied, deny_hosts, AclPermissionType.DENY),
        )
        for p in principals
        for h in hosts
        for op in operations
    )


def _check_args(flags: Flags) -> str:
    switches = (flags.add, flags.remove, flags.list_)
    chosen = [a for a, on in zip(ACTIONS, switches, strict=True) if on]
    if len(chosen) != 1:
        raise AclToolError("Command must include exactly one action: --list, --add, --remove.")
    action = chosen[0]
    given = {
        "--producer": flags.producer,
        "--consumer": flags.consumer,
        "--allow-host": bool(flags.allow_hosts),
        "--allow-principal": bool(flags.allow_principals),
        "--deny-host": bool(flags.deny_hosts),
        "--deny-principal": bool(flags.deny_principals),
        "--operation": bool(flags.operations),
    }
    if action == "--list":
        bad = [f for f in given if given[f] and f != "--operation"]
        if bad:
            raise AclToolError(f"{', '.join(bad)} cannot be used with --list")
    for role in ("--producer", "--consumer"):
        if given[role]:
            bad = [f for f in ("--operation", "--deny-principal", "--deny-host") if given[f]]
            if bad:
                raise AclToolError(f"{', '.join(bad)} cannot be used with {role}")
    if flags.list_principals and action != "--list":
        raise AclToolError("The --principal option is only available if --list is set")
    if flags.producer and not flags.topics:
        raise AclToolError("With --producer you must specify a --topic")
    if flags.idempotent and not flags.producer:
        raise AclToolError("The --idempotent option is only available if --producer is set")
    if flags.consumer and (
        not flags.topics
        or not flags.groups
        or (not flags.producer and (flags.cluster or flags.transactional_ids))
    ):
        raise AclToolError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )
    return action


def _filters(
    flags: Flags, pattern_type: PatternType, cluster: bool
) -> dict[ResourceType, list[ResourcePatternFilter]]:
    def of(rt: ResourceType, names: Iterable[str]) -> list[ResourcePatternFilter]:
        return [ResourcePatternFilter(rt, n.strip(), pattern_type) for n in names]

    out = {
        ResourceType.TOPIC: of(ResourceType.TOPIC, flags.topics),
        ResourceType.GROUP: of(ResourceType.GROUP, flags.groups),
        ResourceType.TRANSACTIONAL_ID: of(ResourceType.TRANSACTIONAL_ID, flags.transactional_ids),
        ResourceType.CLUSTER: of(ResourceType.CLUSTER, [CLUSTER_NAME] if cluster else []),
    }
    for filters in out.values():
        for f in filters:
            if not f.name:
                raise AclToolError(f"an empty {f.resource_type.pascal_name.lower()} name")
    return out


def plan(flags: Flags) -> Plan:
    """What the flags mean, or AclToolError naming the first bad combination."""
    action = _check_args(flags)
    pattern_type = PatternType.from_name(flags.pattern_type)
    if pattern_type == PatternType.UNKNOWN:
        raise AclToolError(
            f"--resource-pattern-type: {flags.pattern_type!r} is not one of "
            "literal, prefixed, any, match"
        )
    if action == "--add" and not pattern_type.is_specific:
        raise AclToolError(
            f"A '--resource-pattern-type' value of '{pattern_type}' is not valid when adding acls."
        )
    if flags.cluster and action == "--add" and pattern_type != PatternType.LITERAL:
        raise AclToolError("--cluster only goes with --resource-pattern-type literal")
    cluster = flags.cluster or flags.idempotent
    by_type = _filters(flags, pattern_type, cluster)
    every_filter = [f for filters in by_type.values() for f in filters]
    if action == "--list":
        return Plan(
            action,
            {f: frozenset() for f in every_filter},
            tuple(sorted(_principals(flags.list_principals, "--principal"))),
        )
    if not every_filter:
        raise AclToolError(
            "You must provide at least one resource: --topic <topic> or --cluster or "
            "--group <group> or --transactional-id <id>"
        )
    acls: dict[ResourcePatternFilter, frozenset[AccessControlEntry]] = {}
    if not flags.producer and not flags.consumer:
        entries = _entries(flags, _operations(flags.operations) or {AclOperation.ALL})
        acls.update({f: entries for f in every_filter})
    if flags.producer:
        Op = AclOperation
        for f in by_type[ResourceType.TOPIC]:
            acls[f] = _entries(flags, {Op.WRITE, Op.DESCRIBE, Op.CREATE}, deny_too=False)
        for f in by_type[ResourceType.TRANSACTIONAL_ID]:
            acls[f] = _entries(flags, {Op.WRITE, Op.DESCRIBE}, deny_too=False)
        if flags.idempotent:
            for f in by_type[ResourceType.CLUSTER]:
                acls[f] = _entries(flags, {Op.IDEMPOTENT_WRITE}, deny_too=False)
    if flags.consumer:
        Op = AclOperation
        for f in by_type[ResourceType.TOPIC]:
            read = _entries(flags, {Op.READ, Op.DESCRIBE}, deny_too=False)
            acls[f] = acls.get(f, frozenset()) | read
        for f in by_type[ResourceType.GROUP]:
            acls[f] = _entries(flags, {Op.READ}, deny_too=False)
    for f, entries in acls.items():
        valid = SUPPORTED_OPERATIONS[f.resource_type] | {AclOperation.ALL}
        if {e.operation for e in entries} - valid:
            names = ", ".join(sorted(o.pascal_name for o in valid))
            raise AclToolError(
                f"ResourceType {f.resource_type.pascal_name} only supports operations {names}"
            )
    if action == "--add" and any(not entries for entries in acls.values()):
        raise AclToolError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return Plan(action, acls)


# --- talking to the cluster ----------------------------------------------------------


def _explain(exc: BaseException) -> str:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(error, KafkaError):
        return str(exc)
    code, detail = error.code(), error.str()
    if code == KafkaError.SECURITY_DISABLED:
        return (
            "the cluster has no authorizer (authorizer.class.name is not set), "
            f"so it keeps no ACLs: {detail}"
        )
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return f"not authorized to manage ACLs (needs ALTER/DESCRIBE on the cluster): {detail}"
    if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
        return f"no broker answered in time ({detail})"
    return f"{error.name()}: {detail}"


def _ck_binding_args(
    rt: ResourceType,
    name: str | None,
    pt: PatternType,
    principal: str | None,
    host: str | None,
    op: AclOperation,
    permission: AclPermissionType,
) -> tuple[Any, ...]:
    return (
        CkResourceType(int(rt)),
        name,
        CkResourcePatternType(int(pt)),
        principal,
        host,
        CkAclOperation(int(op)),
        CkAclPermissionType(int(permission)),
    )


def _ck_filter(pattern: ResourcePatternFilter, entry: AccessControlEntryFilter) -> Any:
    return CkAclBindingFilter(
        *_ck_binding_args(
            pattern.resource_type,
            pattern.name,
            pattern.pattern_type,
            entry.principal,
            entry.host,
            entry.operation,
            entry.permission_type,
        )
    )


def _from_ck(b: Any) -> AclBinding:
    def code(value: Any) -> int:
        return int(getattr(value, "value", value))

    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(code(b.restype)),
            b.name,
            PatternType.from_code(code(b.resource_pattern_type)),
        ),
        AccessControlEntry(
            b.principal,
            b.host,
            AclOperation.from_code(code(b.operation)),
            AclPermissionType.from_code(code(b.permission_type)),
        ),
    )


DESCRIBE_ACLS = 29


def security_disabled(bootstrap: str, extra: Mapping[str, str]) -> str | None:
    """The broker's SECURITY_DISABLED message, or None. librdkafka drops DescribeAcls'
    top-level error and answers an empty list, so an empty --list is asked again here:
    Kafka's tool says the cluster has no authorizer rather than printing nothing."""
    probe = request(
        DESCRIBE_ACLS,
        1,
        "DescribeAclsRequest",
        resource_type_filter=int(ResourceType.ANY),
        resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY),
        principal_filter=None,
        host_filter=None,
        operation=int(AclOperation.ANY),
        permission_type=int(AclPermissionType.ANY),
    )

    async def work(client: Any) -> Any:
        return await client.send(probe)

    try:
        response = run_admin(
            bootstrap, AdminSettings.from_properties(extra, "strandline-acls"), work
        )
    except AdminError as e:
        raise AclToolError(str(e)) from e
    if response.error_code == ErrorCode.security_disabled:
        return str(response.error_message or "no authorizer is configured on the broker")
    return None


class AclAdmin:
    def __init__(self, bootstrap: str, extra: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.extra = dict(extra or {})
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, **(extra or {})}
        self.watch = rdkafka.Watch(bootstrap)
        self.admin = rdkafka.create(AdminClient, self.watch.config(config))

    def _result(self, future: Any) -> Any:
        try:
            return self.watch.wait(self.admin, future, TIMEOUT_S)
        except KafkaException as e:
            raise AclToolError(_explain(e)) from e

    def create(self, bindings: Iterable[AclBinding]) -> None:
        ck = [
            CkAclBinding(
                *_ck_binding_args(
                    b.pattern.resource_type,
                    b.pattern.name,
                    b.pattern.pattern_type,
                    b.entry.principal,
                    b.entry.host,
                    b.entry.operation,
                    b.entry.permission_type,
                )
            )
            for b in bindings
        ]
        for future in self.admin.create_acls(ck, request_timeout=TIMEOUT_S).values():
            self._result(future)

    def describe(self, pattern: ResourcePatternFilter) -> list[AclBinding]:
        future = self.admin.describe_acls(_ck_filter(pattern, ANY_ENTRY), request_timeout=TIMEOUT_S)
        found = [_from_ck(b) for b in self._result(future)]
        if not found:
            disabled = security_disabled(self.bootstrap, self.extra)
            if disabled is not None:
                raise AclToolError(
                    "SECURITY_DISABLED: the cluster has no authorizer "
                    f"(authorizer.class.name is not set), so it keeps no ACLs ({disabled})"
                )
        return found

    def delete(
        self, pattern: ResourcePatternFilter, entries: Iterable[AccessControlEntryFilter]
    ) -> list[AclBinding]:
        filters = [_ck_filter(pattern, e) for e in entries]
        deleted: list[AclBinding] = []
        for future in self.admin.delete_acls(filters, request_timeout=TIMEOUT_S).values():
            deleted.extend(_from_ck(b) for b in self._result(future))
        return deleted


# --- printing, as kafka-acls prints ------------------------------------------------


def _entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join(f"\t{e}" for e in sorted(entries, key=_entry_order))


def _entry_order(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, e.operation, e.permission_type)


def print_resource_acls(acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
    for pattern in sorted(acls, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
        print(f"Current ACLs for resource `{pattern}`: \n {_entry_lines(acls[pattern])} \n")


def _grouped(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    out: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, set()).add(b.entry)
    return out


def _current(admin: AclAdmin, filters: Iterable[ResourcePatternFilter]) -> list[AclBinding]:
    wanted = list(filters)
    if not wanted:
        return admin.describe(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY))
    return [b for f in wanted for b in admin.describe(f)]


def _confirm(message: str, force: bool) -> bool:
    if force:
        return True
    print(message)
    try:
        return input().strip().lower() == "y"
    except EOFError:
        return False


def run(admin: AclAdmin, the_plan: Plan, force: bool) -> None:
    if the_plan.action == "--add":
        for f, entries in the_plan.acls.items():
            pattern = ResourcePattern(f.resource_type, f.name or "", f.pattern_type)
            print(f"Adding ACLs for resource `{pattern}`: \n {_entry_lines(entries)} \n")
            admin.create(AclBinding(pattern, e) for e in entries)
        print_resource_acls(_grouped(_current(admin, the_plan.acls)))
    elif the_plan.action == "--remove":
        for f, entries in the_plan.acls.items():
            if not entries:
                question = (
                    f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"
                )
            else:
                question = (
                    f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)} \n "
                    f"from resource filter `{f}`? (y/n)"
                )
            if _confirm(question, force):
                admin.delete(f, [e.to_filter() for e in entries] or [ANY_ENTRY])
        print_resource_acls(_grouped(_current(admin, the_plan.acls)))
    else:
        acls = _grouped(_current(admin, the_plan.acls))
        if not the_plan.list_principals:
            print_resource_acls(acls)
            return
        for principal in the_plan.list_principals:
            print(f"ACLs for principal `{principal}`")
            mine = {
                p: {e for e in entries if e.principal == principal} for p, entries in acls.items()
            }
            print_resource_acls({p: entries for p, entries in mine.items() if entries})


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


def acls(
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", help="host:port[,host:port] of any broker"
    ),
    command_config: Path | None = typer.Option(
        None, "--command-config", help="Client properties file (security settings)"
    ),
    add: bool = typer.Option(False, "--add", help="Add ACLs"),
    remove: bool = typer.Option(False, "--remove", help="Remove ACLs"),
    list_: bool = typer.Option(False, "--list", help="List ACLs (of the given resources)"),
    allow_principal: list[str] = typer.Option(
        [], "--allow-principal", help="Type:name to allow, e.g. User:alice or User:* (repeatable)"
    ),
    deny_principal: list[str] = typer.Option(
        [], "--deny-principal", help="Type:name to deny; deny wins over allow (repeatable)"
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="Host the allowed principals may come from (default *)"
    ),
    deny_host: list[str] = typer.Option(
        [], "--deny-host", help="Host the denied principals are refused from (default *)"
    ),
    operation: list[str] = typer.Option(
        [],
        "--operation",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (the default; repeatable)",
    ),
    topic: list[str] = typer.Option([], "--topic", help="Topic ('*' = every topic; repeatable)"),
    group: list[str] = typer.Option([], "--group", help="Consumer group ('*' = every group)"),
    cluster: bool = typer.Option(False, "--cluster", help="The cluster resource"),
    transactional_id: list[str] = typer.Option(
        [], "--transactional-id", help="Transactional id ('*' = every one)"
    ),
    resource_pattern_type: str = typer.Option(
        "literal",
        "--resource-pattern-type",
        help="literal or prefixed; to --list/--remove also any (exact name, any pattern "
        "type) or match (every pattern that applies to the name)",
    ),
    principal: list[str] = typer.Option(
        [], "--principal", help="Only this principal's ACLs (--list; repeatable)"
    ),
    producer: bool = typer.Option(
        False, "--producer", help="Producer role: Write, Describe, Create on --topic"
    ),
    consumer: bool = typer.Option(
        False, "--consumer", help="Consumer role: Read, Describe on --topic, Read on --group"
    ),
    idempotent: bool = typer.Option(
        False, "--idempotent", help="With --producer: IdempotentWrite on the cluster"
    ),
    force: bool = typer.Option(False, "--force", help="Do not ask before removing"),
) -> None:
    """Add, remove and list ACLs (kafka-acls.sh)."""
    try:
        if not bootstrap_server:
            raise AclToolError("--bootstrap-server is required")
        the_plan = plan(
            Flags(
                add=add,
                remove=remove,
                list_=list_,
                allow_principals=allow_principal,
                deny_principals=deny_principal,
                allow_hosts=allow_host,
                deny_hosts=deny_host,
                operations=operation,
                topics=topic,
                groups=group,
                cluster=cluster,
                transactional_ids=transactional_id,
                pattern_type=resource_pattern_type,
                list_principals=principal,
                producer=producer,
                consumer=consumer,
                idempotent=idempotent,
            )
        )
        try:
            extra = read_command_config(command_config)
        except TopicToolError as e:
            raise AclToolError(str(e)) from e
        run(AclAdmin(bootstrap_server, extra), the_plan, force)
    except (AclToolError, rdkafka.ClientError) as e:
        raise _fail(str(e)) from e
