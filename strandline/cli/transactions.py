"""`strandline transactions`: list, describe and abort transactions, like
kafka-transactions.sh.

    strandline transactions --bootstrap-server H:P list [--state Ongoing]
    strandline transactions --bootstrap-server H:P describe --transactional-id ID
    strandline transactions --bootstrap-server H:P abort --transactional-id ID

Everything goes over the Kafka protocol (Metadata, ListTransactions on every broker,
FindCoordinator with key type 1, DescribeTransactions, InitProducerId), so it works
against any broker of the cluster, or any Kafka cluster. --command-config carries the
client's security settings (security.protocol, sasl.*, ssl.*), spelled as in Kafka.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
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
) -> None:
    """Every transactional id of the cluster (ListTransactions on every broker)."""
    settings: Settings = ctx.obj

    async def run() -> list[tuple[Any, int]]:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            return await client.list(state or [], producer_id or [])

    table = Table("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
    for txn, broker_id in _run(run()):
        table.add_row(
            escape(txn.transactional_id),
            str(broker_id),
            str(txn.producer_id),
            txn.transaction_state,
        )
    console.print(table)


@app.command("describe")
def describe_command(
    ctx: typer.Context,
    transactional_id: str = typer.Option(..., "--transactional-id", help="the id to describe"),
) -> None:
    """State, producer id and epoch, and the partitions of the current transaction."""
    settings: Settings = ctx.obj

    async def run() -> Described:
        async with TxnClient(settings.bootstrap, settings.security) as client:
            return await client.describe(transactional_id)

    console.print(_describe_table(_run(run())))


def _describe_table(d: Described) -> Table:
    table = Table(
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    )
    started = d.start_ms >= 0
    open_ = started and d.state in ("Ongoing", "PrepareCommit", "PrepareAbort")
    table.add_row(
        str(d.coordinator),
        escape(d.transactional_id),
        str(d.producer_id),
        str(d.producer_epoch),
        d.state,
        str(d.timeout_ms),
        str(d.start_ms) if started else "None",
        str(max(0, int(time.time() * 1000) - d.start_ms)) if open_ else "None",
        escape(",".join(d.partitions)) if d.partitions else "None",
    )
    return table


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
