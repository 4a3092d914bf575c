"""What SASL_SSL costs (docs/security.md): the same 3-broker cluster, PLAINTEXT vs SASL_SSL.

    .venv/bin/python bench/security.py [--quick] [--rounds N]

Each round starts a 3-broker cluster per mode (`LocalCluster.up(3, security=...)`: in
SASL_SSL mode TLS and SCRAM-SHA-512 for clients *and* between brokers), one after the
other, never both at once, alternating which goes first. In each:

1. produce 1 KiB records, confluent-kafka, `acks=all`, into a topic of 3 partitions with
   replication factor 3 (so every byte also crosses two follower fetches);
2. consume the topic from the beginning, three reads with a new consumer each, median;
3. connection set-up: N connections to broker 1 opened one after the other, each timed
   from `connect()` to the first Metadata answer (TCP, TLS handshake, SaslHandshake + the
   two SCRAM SaslAuthenticate round trips, Metadata), split at the end of the TLS
   handshake and of the login; median and p99.

Prints a rich table with the SASL_SSL ÷ PLAINTEXT ratios and one `BENCH_JSON {...}` line.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Run as a script (`python bench/security.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.index import load_request_schema  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.targets import STRANDLINE_BENCH_OVERRIDES  # noqa: E402
from bench.workloads import (  # noqa: E402
    PARTITIONS,
    consume_throughput,
    create_topic,
    percentile,
    produce_throughput,
)
from strandline.client.connection import KafkaConnection  # noqa: E402
from strandline.client.security import ClientSecurity  # noqa: E402
from strandline.launcher.local_cluster import LocalCluster  # noqa: E402

MODES = ("plaintext", "sasl_ssl")
RECORD = 1024
METADATA_API_KEY = 3


@contextmanager
def cluster(mode: str) -> Iterator[LocalCluster]:
    overrides = {**STRANDLINE_BENCH_OVERRIDES, "offsets.topic.num.partitions": "1"}
    with tempfile.TemporaryDirectory(prefix=f"strandline-security-bench-{mode}-") as data_dir:
        local = LocalCluster(Path(data_dir))
        try:
            local.up(3, overrides, security=mode)
            local.wait_for_full_metadata()
            yield local
        finally:
            local.stop()


async def connection_setups(local: LocalCluster, count: int) -> dict[str, list[float]]:
    """Per connection, ms from connect() to: the end of the TLS handshake, the end of
    the SASL login, the first Metadata answer (PLAINTEXT: the first two are the TCP
    connect)."""
    host, port = local.broker_address(1)
    security = ClientSecurity.from_config(local.client_config) if local.client_config else None
    request: Any = load_request_schema(METADATA_API_KEY, 12)(
        topics=None,  # type: ignore[call-arg]
        allow_auto_topic_creation=False,  # type: ignore[call-arg]
        include_topic_authorized_operations=False,  # type: ignore[call-arg]
    )
    times: dict[str, list[float]] = {"tls": [], "login": [], "metadata": []}
    for _ in range(count):
        start = time.perf_counter()
        context = None if security is None else security.ssl_context
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None
        )
        tls = time.perf_counter()
        conn = KafkaConnection(reader, writer, client_id="security-bench")
        if security is not None and security.sasl_mechanism is not None:
            await conn._authenticate(security)
        login = time.perf_counter()
        await conn.send(request, timeout=10)
        done = time.perf_counter()
        await conn.close()
        times["tls"].append((tls - start) * 1000)
        times["login"].append((login - start) * 1000)
        times["metadata"].append((done - start) * 1000)
    return times


def client_key_derivation_ms(rounds: int = 50) -> float:
    """What the client's side of SCRAM-SHA-512 costs by itself: the salted password,
    PBKDF2-HMAC-SHA-512 over the broker's 4096 iterations (every SCRAM client pays it
    at each login; the broker stores only the derived keys)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        hashlib.pbkdf2_hmac("sha512", b"a-password", os.urandom(32), 4096)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run_mode(mode: str, count: int, max_seconds: float, reads: int, setups: int) -> dict[str, Any]:
    with cluster(mode) as local:
        topic = f"security-{mode}"
        client = local.client_config
        create_topic(local.bootstrap, topic, PARTITIONS, 3, client)
        produced = produce_throughput(
            local.bootstrap, topic, RECORD, count, "all", max_seconds, client
        )
        expected = produced.records + PARTITIONS  # the warm-up records too
        reads_mb_s = [
            consume_throughput(
                local.bootstrap, topic, expected, 120, f"security-bench-{i}", client
            ).mb_per_s
            for i in range(reads)
        ]
        setup = asyncio.run(connection_setups(local, setups))
    return {
        "produce_mb_s": round(produced.mb_per_s, 1),
        "produce_records": produced.records,
        "produce_s": round(produced.seconds, 2),
        "consume_mb_s_reads": [round(x, 1) for x in reads_mb_s],
        "consume_mb_s": round(statistics.median(reads_mb_s), 1),
        "setup_ms_median": round(statistics.median(setup["metadata"]), 2),
        "setup_ms_p99": round(percentile(sorted(setup["metadata"]), 99), 2),
        "setup_tls_ms_median": round(statistics.median(setup["tls"]), 2),
        "setup_login_ms_median": round(statistics.median(setup["login"]), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short run")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both modes")
    args = parser.parse_args(argv)
    count, max_seconds, reads, setups = (
        (30_000, 5.0, 1, 50) if args.quick else (300_000, 20.0, 3, 200)
    )
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for i in range(args.rounds):
        order = MODES if i % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            runs[mode].append(run_mode(mode, count, max_seconds, reads, setups))

    def median(mode: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[mode]))

    keys = (
        ("produce_mb_s", "produce 1 KiB acks=all, rf=3 (MB/s)"),
        ("consume_mb_s", "consume 1 KiB (MB/s, median of reads)"),
        ("setup_ms_median", "connection set-up to first Metadata, median (ms)"),
        ("setup_ms_p99", "connection set-up to first Metadata, p99 (ms)"),
        ("setup_tls_ms_median", "  of which TCP + TLS handshake, median (ms)"),
        ("setup_login_ms_median", "  TCP + TLS + SASL login, median (ms)"),
    )
    ratios = {key: round(median("sasl_ssl", key) / median("plaintext", key), 3) for key, _ in keys}
    table = Table(title=f"SASL_SSL vs PLAINTEXT, 3 brokers (median of {args.rounds} rounds)")
    table.add_column("figure")
    table.add_column("PLAINTEXT", justify="right")
    table.add_column("SASL_SSL", justify="right")
    table.add_column("SASL_SSL ÷ PLAINTEXT", justify="right")
    for key, label in keys:
        table.add_row(
            label,
            f"{median('plaintext', key):.2f}",
            f"{median('sasl_ssl', key):.2f}",
            f"{ratios[key]:.3f}",
        )
    pbkdf2_ms = client_key_derivation_ms()
    table.add_row("  client-side PBKDF2-SHA-512 x4096 alone (ms)", "-", f"{pbkdf2_ms:.2f}", "-")
    Console(width=120).print(table)
    plan = {"count": count, "max_seconds": max_seconds, "reads": reads, "setups": setups}
    result = {"plan": plan, "runs": runs, "ratios": ratios, "client_pbkdf2_ms": pbkdf2_ms}
    print("BENCH_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
