"""`strandline transactions`: list, describe and abort transactions, like
kafka-transactions.sh.

    strandline transactions --bootstrap-server H:P list [--state Ongoing]
    strandline transactions --bootstrap-server H:P describe --transactional-id ID
    strandline transactions --bootstrap-server H:P abort --transactional-id ID
    strandline transactions --bootstrap-server H:P describe-producers --topic T --partition 0
    strandline transactions --bootstrap-server H:P find-hanging --broker-id 1

They print kafka-transactions.sh's columns by default; `--output table` a rich table,
`--output json` one JSON document.

Everything goes over the Kafka protocol (Metadata, ListTransactions on every broker,
FindCoordinator with key type 1, DescribeTransactions, InitProducerId), so it works
against any broker of the cluster, or any Kafka cluster. --command-config carries the
client's security settings (security.protocol, sasl.*, ssl.*), spelled as in Kafka.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.cli.kafka_text import OUTPUT_HELP, check_output, pretty_table
from strandline.cli.txn_wire import DescribeTransactionsResponseV0
from strandline.client.admin import AdminClient, AdminError, AdminSettings
from strandline.client.security import ClientSecurity
from strandline.protocol.messages import build, request_module

app = typer.Typer(
    no_args_is_help=True,
    help="List, describe and abort transactions (kafka-transactions.sh).",
)
console = tool_console()
err_console = tool_console(stderr=True)

REQUEST_TIMEOUT_S = 15.0
RETRY_S = 0.2
COORDINATOR_WAIT_S = 30.0
ABORT_WAIT_S = 60.0
TRANSACTION_KEY_TYPE = 1
# Answers that mean "ask again, maybe elsewhere": the coordinator moves, loads its
# partition of __transaction_state, or is still finishing the transaction.
RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.concurrent_transactions,
    }
)


class TxnToolError(AdminError):
    """Reported to the user as one line, exit code 1."""


def _request(api_key: int, version: int, message: str, /, **fields: Any) -> Any:
    return build(getattr(request_module(api_key, version), message), **fields)


def _error_name(code: int) -> str:
    return ErrorCode(code).name.upper()


@dataclass(frozen=True)
class Described:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int
    partitions: tuple[str, ...]


class TxnClient(AdminClient):
    """The shared admin client (strandline.client.admin) with the transaction APIs."""

    def __init__(
        self,
        bootstrap: str,
        security: ClientSecurity | None | AdminSettings,
        client_id: str = "strandline-txn",
    ) -> None:
        settings = (
            security
            if isinstance(security, AdminSettings)
            else AdminSettings(client_id, REQUEST_TIMEOUT_S, security)
        )
        super().__init__(bootstrap, settings)

    async def brokers_by_id(self) -> dict[int, tuple[str, int]]:
        await self.metadata(())
        return self.brokers

    async def coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]]:
        """FindCoordinator (key type 1), retried while __transaction_state is created or
        its partition is moving."""
        return await self.find_coordinator(
            transactional_id, TRANSACTION_KEY_TYPE, COORDINATOR_WAIT_S
        )

    async def list(self, states: list[str], producer_ids: list[int]) -> list[tuple[Any, int]]:
        """ListTransactions on every broker: each coordinates its own partitions."""
        found = []
        for broker_id, address in sorted((await self.brokers_by_id()).items()):
            deadline = time.monotonic() + COORDINATOR_WAIT_S
            while True:
                response = await self.send_to(
                    address,
                    _request(
                        66,
                        0,
                        "ListTransactionsRequest",
                        state_filters=tuple(states),
                        producer_id_filters=tuple(producer_ids),
                    ),
                )
                error = ErrorCode(response.error_code)
                if error not in RETRIABLE or time.monotonic() > deadline:
                    break
                await asyncio.sleep(RETRY_S)
            if error is not ErrorCode.none:
                raise TxnToolError(
                    f"broker {broker_id}: ListTransactions failed with {_error_name(error)}"
                )
            if response.unknown_state_filters:
                raise TxnToolError(
                    f"unknown state {', '.join(response.unknown_state_filters)} (states: "
                    "Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)"
                )
            found += [(t, broker_id) for t in response.transaction_states]
        return sorted(found, key=lambda entry: entry[0].transactional_id)

    async def describe(self, transactional_id: str) -> Described:
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            node, address = await self.coordinator(transactional_id)
            response = await self.send_to(
                address,
                _request(
                    65, 0, "DescribeTransactionsRequest", transactional_ids=(transactional_id,)
                ),
                DescribeTransactionsResponseV0,
            )
            (state,) = response.transaction_states
            error = ErrorCode(state.error_code)
            if error not in RETRIABLE or time.monotonic() > deadline:
                break
            await asyncio.sleep(RETRY_S)
        if error is ErrorCode.transactional_id_not_found:
            raise TxnToolError(f"transactional id {transactional_id!r} does not exist")
        if error is not ErrorCode.none:
            raise TxnToolError(f"DescribeTransactions {transactional_id!r}: {_error_name(error)}")
        return Described(
            node,
            transactional_id,
            int(state.producer_id),
            int(state.producer_epoch),
            state.transaction_state,
            int(state.transaction_timeout / datetime.timedelta(milliseconds=1)),
            int(state.transaction_start_time),
            tuple(f"{t.topic}-{p}" for t in state.topics for p in t.partitions),
        )

    async def fence(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """InitProducerId with the transactional id at its coordinator: bumps the epoch
        (fencing the current producer) and aborts its open transaction; retried while
        the coordinator answers CONCURRENT_TRANSACTIONS (the abort is still running)."""
        deadline = time.monotonic() + ABORT_WAIT_S
        while True:
            _node, address = await self.coordinator(transactional_id)
            response = await self.send_to(
                address,
                _request(
                    22,
                    4,
                    "InitProducerIdRequest",
                    transactional_id=transactional_id,
                    transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                    producer_id=-1,
                    producer_epoch=-1,
                ),
            )
            error = ErrorCode(response.error_code)
            if error is ErrorCode.none:
                return int(response.producer_id), int(response.producer_epoch)
            if error not in RETRIABLE or time.monotonic() > deadline:
                raise TxnToolError(
                    f"InitProducerId {transactional_id!r} failed with {_error_name(error)}"
                )
            await asyncio.sleep(RETRY_S)


@dataclass(frozen=True)
class OpenTxn:
    """A transaction open in one partition's log (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


ALIVE_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


def hanging(
    open_txns: list[OpenTxn],
    coordinators: dict[int, Described],
    now_ms: int,
    max_timeout_ms: int,
) -> list[OpenTxn]:
    """kafka-transactions.sh find-hanging's test: a transaction open in a log for longer
    than any transaction may last, which no coordinator has open on that partition (the
    producer id is unknown to every coordinator, now belongs to another id, or its
    transaction there is over). Such a transaction holds back the last stable offset, so
    read_committed consumers stop at it, until it is aborted."""
    out = []
    for txn in open_txns:
        if now_ms - txn.last_timestamp_ms < max_timeout_ms:
            continue
        known = coordinators.get(txn.producer_id)
        if (
            known is not None
            and known.producer_id == txn.producer_id
            and known.state in ALIVE_STATES
            and f"{txn.topic}-{txn.partition}" in known.partitions
        ):
            continue
        out.append(txn)
    return out


async def open_transactions(
    client: TxnClient, broker_id: int | None, topic: str | None, partition: int | None
) -> list[OpenTxn]:
    """DescribeProducers for the partitions asked for: on `broker_id` (every partition it
    hosts, as Kafka's --broker-id) or else on each partition's leader."""
    metadata = await client.metadata([topic] if topic is not None else None)
    by_broker: dict[int, dict[str, list[int]]] = {}
    for t in metadata.topics:
        if topic is not None and t.name != topic:
            continue
        if topic is None and t.name.startswith("__"):
            continue  # internal topics hold no producer's transactions
        for p in t.partitions:
            if partition is not None and int(p.partition_index) != partition:
                continue
            replicas = [int(r) for r in p.replica_nodes]
            if broker_id is not None and broker_id not in replicas:
                continue
            target = broker_id if broker_id is not None else int(p.leader_id)
            if target < 0:
                raise TxnToolError(f"{t.name}-{p.partition_index} has no leader to ask")
            by_broker.setdefault(target, {}).setdefault(t.name, []).append(int(p.partition_index))
    if topic is not None and not by_broker:
        raise TxnToolError(f"topic {topic!r} has no such partition here")
    found: list[OpenTxn] = []
    for target, topics in sorted(by_broker.items()):
        response = await client.send(
            _request(
                61,
                0,
                "DescribeProducersRequest",
                topics=tuple(
                    _request(61, 0, "TopicRequest", name=name, partition_indexes=tuple(parts))
                    for name, parts in sorted(topics.items())
                ),
            ),
            broker_id=target,
        )
        for t in response.topics:
            for p in t.partitions:
                error = ErrorCode(p.error_code)
                if error is not ErrorCode.none:
                    raise TxnToolError(
                        f"broker {target}: DescribeProducers {t.name}-{p.partition_index}: "
                        f"{_error_name(error)}"
                    )
                found += [
                    OpenTxn(
                        t.name,
                        int(p.partition_index),
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.coordinator_epoch),
                        int(s.current_txn_start_offset),
                        int(s.last_timestamp),
                    )
                    for s in p.active_producers
                    if int(s.current_txn_start_offset) >= 0
                ]
    return found


@dataclass(frozen=True)
class ProducerRow:
    """One active producer of a partition (DescribeProducers), as describe-producers shows it."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    start_offset: int  # -1: no transaction open


async def describe_producers(
    client: TxnClient, topic: str, partition: int, broker_id: int | None
) -> list[ProducerRow]:
    """DescribeProducers for one partition, asked of `broker_id` or else of its leader."""
    metadata = await client.metadata([topic])
    found = [t for t in metadata.topics if t.name == topic]
    parts = {int(p.partition_index): p for t in found for p in t.partitions}
    if partition not in parts:
        raise TxnToolError(f"topic {topic!r} has no partition {partition}")
    target = broker_id if broker_id is not None else int(parts[partition].leader_id)
    if target < 0:
        raise TxnToolError(f"{topic}-{partition} has no leader to ask")
    response = await client.send(
        _request(
            61,
            0,
            "DescribeProducersRequest",
            topics=(_request(61, 0, "TopicRequest", name=topic, partition_indexes=(partition,)),),
        ),
        broker_id=target,
    )
    rows = []
    for t in response.topics:
        for p in t.partitions:
            error = ErrorCode(p.error_code)
            if error is not ErrorCode.none:
                where = f"broker {broker_id}" if broker_id is not None else "leader"
                raise TxnToolError(
                    f"failed to describe producers for partition {topic}-{partition} on "
                    f"{where}: {_error_name(error)}"
                )
            rows += [
                ProducerRow(
                    int(s.producer_id),
                    int(s.producer_epoch),
                    int(s.coordinator_epoch),
                    int(s.last_sequence),
                    int(s.last_timestamp),
                    int(s.current_txn_start_offset),
                )
                for s in p.active_producers
            ]
    return rows


async def coordinators_of(client: TxnClient, producer_ids: list[int]) -> dict[int, Described]:
    """producer id -> its transactional id's state, for the ids some coordinator knows."""
    if not producer_ids:
        return {}
    out = {}
    for state, _broker in await client.list([], producer_ids):
        described = await client.describe(state.transactional_id)
        out[int(state.producer_id)] = described
    return out


# == commands ==================================================================================


@dataclass
class Settings:
    bootstrap: str
    security: AdminSettings


def _fail(error: Exception | str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)
    return typer.Exit(1)


@app.callback()
def main(
    ctx: typer.Context,
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help="HOST:PORT of any broker"),
    command_config: Path | None = typer.Option(
        None, "--command-config", help="Client properties file (security settings)"
    ),
) -> None:
    try:
        security = AdminSettings.from_file(command_config, "strandline-txn", REQUEST_TIMEOUT_S)
    except AdminError as e:
        raise _fail(e) from e
    ctx.obj = Settings(bootstrap_server, security)


def _show(
    output: str, headers: tuple[str, ...], rows: list[tuple[str, ...]], document: Any
) -> None:
    """kafka-transactions.sh's columns (the default), our table, or `document` as JSON."""
    if output == "json":
        print(json.dumps(document))
    elif output == "table":
        table = Table(*headers)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
    else:
        print("\n".join(pretty_table(headers, rows)))


def _output(output: str) -> str:
    bad = check_output(output)
    if bad is not None:
        raise _fail(bad)
    return output


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except (AdminError, OSError, TimeoutError) as e:
        raise _fail(str(e) or "timed out") from e


@app.command("list")
def list_command(
    ctx: typer.Context,
    state: list[str] = typer.Option(None, "--state", help="only transactions in this state"),
    producer_id: list[int] = typer.Option(None, "--producer-id", help="only this producer id"),
    output: str = typer.Option("kafka", "--output", help=OUTPUT_HELP),
) -> None:
    """Every transactional id of the cluster (ListTransactions on every broker)."""
    settings: Settings = ctx.obj
    _output(output)

    async def run() -> list[tuple[Any, int]]:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            return await client.list(state or [], producer_id or [])

    found = _run(run())
    _show(
        output,
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
        [
            (txn.transactional_id, str(broker), str(txn.producer_id), txn.transaction_state)
            for txn, broker in found
        ],
        [
            {
                "transactional_id": txn.transactional_id,
                "coordinator": broker,
                "producer_id": int(txn.producer_id),
                "state": txn.transaction_state,
            }
            for txn, broker in found
        ],
    )


@app.command("describe")
def describe_command(
    ctx: typer.Context,
    transactional_id: str = typer.Option(..., "--transactional-id", help="the id to describe"),
    output: str = typer.Option("kafka", "--output", help=OUTPUT_HELP),
) -> None:
    """State, producer id and epoch, and the partitions of the current transaction."""
    settings: Settings = ctx.obj
    _output(output)

    async def run() -> Described:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            return await client.describe(transactional_id)

    d = _run(run())
    started = d.start_ms >= 0
    open_ = started and d.state in ALIVE_STATES
    duration = max(0, int(time.time() * 1000) - d.start_ms) if open_ else None
    _show(
        output,
        (
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ),
        [
            (
                str(d.coordinator),
                d.transactional_id,
                str(d.producer_id),
                str(d.producer_epoch),
                d.state,
                str(d.timeout_ms),
                str(d.start_ms) if started else "None",
                str(duration) if duration is not None else "None",
                # Kafka joins them with commas, an empty cell when there are none.
                ",".join(d.partitions),
            )
        ],
        {
            "coordinator_id": d.coordinator,
            "transactional_id": d.transactional_id,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "state": d.state,
            "transaction_timeout_ms": d.timeout_ms,
            "transaction_start_time_ms": d.start_ms if started else None,
            "transaction_duration_ms": duration,
            "topic_partitions": list(d.partitions),
        },
    )


@app.command("describe-producers")
def describe_producers_command(
    ctx: typer.Context,
    topic: str = typer.Option(..., "--topic", help="topic name"),
    partition: int = typer.Option(..., "--partition", min=0, help="partition number"),
    broker_id: int | None = typer.Option(
        None, "--broker-id", help="ask this replica (default: the leader)"
    ),
    output: str = typer.Option("kafka", "--output", help=OUTPUT_HELP),
) -> None:
    """The active producers of a partition: ids, epochs, last sequence and the start
    offset of their open transaction (kafka-transactions.sh describe-producers)."""
    settings: Settings = ctx.obj
    _output(output)

    async def run() -> list[ProducerRow]:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            return await describe_producers(client, topic, partition, broker_id)

    found = _run(run())
    _show(
        output,
        (
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ),
        [
            (
                str(r.producer_id),
                str(r.producer_epoch),
                str(r.coordinator_epoch),
                str(r.last_sequence),
                str(r.last_timestamp_ms),
                str(r.start_offset) if r.start_offset >= 0 else "None",
            )
            for r in found
        ],
        [
            {
                "producer_id": r.producer_id,
                "producer_epoch": r.producer_epoch,
                "coordinator_epoch": r.coordinator_epoch,
                "last_sequence": r.last_sequence,
                "last_timestamp_ms": r.last_timestamp_ms,
                "current_transaction_start_offset": r.start_offset if r.start_offset >= 0 else None,
            }
            for r in found
        ],
    )


@app.command("abort")
def abort_command(
    ctx: typer.Context,
    transactional_id: str = typer.Option(..., "--transactional-id", help="the id to fence"),
    transaction_timeout_ms: int = typer.Option(
        60_000,
        "--transaction-timeout-ms",
        help="timeout recorded for the id (must not exceed transaction.max.timeout.ms)",
    ),
) -> None:
    """Abort the open transaction of a transactional id by fencing its producer.

    This sends InitProducerId with the transactional id, as a new producer instance
    would: the coordinator bumps the producer epoch, aborts the open transaction (markers
    on every partition) and the current producer is fenced (its next request fails with
    PRODUCER_FENCED). Unlike kafka-transactions.sh's `abort`, which writes an abort
    marker on one partition for a hanging transaction given by producer id, epoch and
    start offset, this works on the whole transaction through its coordinator.
    """
    settings: Settings = ctx.obj

    async def run() -> tuple[Described, tuple[int, int], Described]:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            before = await client.describe(transactional_id)
            fenced = await client.fence(transactional_id, transaction_timeout_ms)
            after = await client.describe(transactional_id)
            return before, fenced, after

    before, (producer_id, epoch), after = _run(run())
    if before.state in ("Ongoing", "PrepareAbort"):
        what = f"aborted its {before.state} transaction on {len(before.partitions)} partitions"
    else:
        what = f"no transaction was open ({before.state})"
    console.print(
        f"Fenced transactional id {escape(transactional_id)!s}: producer id {producer_id} "
        f"is now at epoch {epoch}; {what}. State now: {after.state}."
    )


@app.command("find-hanging")
def find_hanging_command(
    ctx: typer.Context,
    broker_id: int | None = typer.Option(
        None, "--broker-id", help="every partition this broker hosts, asked of it"
    ),
    topic: str | None = typer.Option(None, "--topic", help="this topic's partitions"),
    partition: int | None = typer.Option(None, "--partition", help="with --topic"),
    max_transaction_timeout: int = typer.Option(
        15,
        "--max-transaction-timeout",
        min=0,
        help="minutes: open longer than this (transaction.max.timeout.ms) is suspect",
    ),
    output: str = typer.Option("kafka", "--output", help=OUTPUT_HELP),
) -> None:
    """Transactions open in a partition's log that no coordinator has open there
    (kafka-transactions.sh find-hanging): they hold back read_committed consumers."""
    settings: Settings = ctx.obj
    _output(output)
    if (broker_id is None) == (topic is None):
        raise _fail("give --broker-id or --topic")
    if partition is not None and topic is None:
        raise _fail("--partition goes with --topic")

    async def run() -> list[OpenTxn]:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            candidates = await open_transactions(client, broker_id, topic, partition)
            now_ms = int(time.time() * 1000)
            max_ms = max_transaction_timeout * 60_000
            old = [t for t in candidates if now_ms - t.last_timestamp_ms >= max_ms]
            known = await coordinators_of(client, sorted({t.producer_id for t in old}))
            return hanging(old, known, now_ms, max_ms)

    found = _run(run())
    now_ms = int(time.time() * 1000)
    _show(
        output,
        (
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ),  # fmt: skip
        [
            (
                t.topic,
                str(t.partition),
                str(t.producer_id),
                str(t.producer_epoch),
                str(t.coordinator_epoch),
                str(t.start_offset),
                str(t.last_timestamp_ms),
                str((now_ms - t.last_timestamp_ms) // 60_000),
            )  # fmt: skip
            for t in found
        ],
        [
            {
                "topic": t.topic,
                "partition": t.partition,
                "producer_id": t.producer_id,
                "producer_epoch": t.producer_epoch,
                "coordinator_epoch": t.coordinator_epoch,
                "start_offset": t.start_offset,
                "last_timestamp_ms": t.last_timestamp_ms,
                "duration_min": (now_ms - t.last_timestamp_ms) // 60_000,
            }
            for t in found
        ],
    )
