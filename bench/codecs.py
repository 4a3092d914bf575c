"""The hand-written Produce/Fetch codecs against kio (docs/scaling.md), pure functions only.

    .venv/bin/python bench/codecs.py [--quick]

For each hot-path message: µs per message with kio (as the broker uses it today) and
with `strandline.protocol.produce_codec` / `fetch_codec`, and kio ÷ ours. Encoders are
timed twice: the encoder alone (kio given its objects ready-made) and the way a handler
pays for it (kio: building its frozen dataclasses with `messages.build`, then encoding;
ours: building plain tuples, then encoding). Each figure is the best of many short
runs, kio's and ours alternating (the runs least disturbed by other work on the
machine). Prints a rich table and one `BENCH_JSON {...}` line. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script (`python bench/codecs.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.errors import ErrorCode  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from strandline.client.connection import decode_response  # noqa: E402
from strandline.protocol.codec import (  # noqa: E402
    decode_request,
    encode_request,
    encode_response,
    parse_header,
    response_type,
)
from strandline.protocol.fetch_codec import (  # noqa: E402
    FetchPartitionResult,
    decode_fetch_request,
    decode_fetch_response_v12,
    encode_fetch_request_v12,
    encode_fetch_response,
)
from strandline.protocol.fetch_response import encode_chunked_response  # noqa: E402
from strandline.protocol.messages import build, request_module, response_class  # noqa: E402
from strandline.protocol.produce_codec import (  # noqa: E402
    ProducePartitionResult,
    decode_produce_request,
    encode_produce_response,
)

BATCH = b"\x01" * 120  # one small batch (its bytes are not looked at)
TOPIC = "bench-topic"


def best_pair_us(
    kio_fn: Callable[[], object], ours_fn: Callable[[], object], rounds: int, run_s: float
) -> tuple[float, float]:
    """Best time of one call of each, in µs, over `rounds` runs of about `run_s` each,
    alternating the two so that other work on the machine weighs on both alike."""
    timers = [timeit.Timer(kio_fn), timeit.Timer(ours_fn)]
    numbers = []
    for timer in timers:
        number, took = timer.autorange()
        numbers.append(max(1, int(number * run_s / took)))
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(numbers[i]) / numbers[i])
    return best[0] * 1e6, best[1] * 1e6


# --- produce request ----------------------------------------------------------------


def produce_request_frame(version: int, partitions: int) -> tuple[Any, bytes, int]:
    m = request_module(0, version)
    request = m.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            m.TopicProduceData(
                name=TOPIC,
                partition_data=tuple(
                    m.PartitionProduceData(index=p, records=BATCH) for p in range(partitions)
                ),
            ),
        ),
    )
    frame = encode_request(1, "rdkafka", request)[4:]
    header, pos = parse_header(frame)
    return header, frame, pos


# --- produce response ---------------------------------------------------------------


def produce_results(partitions: int) -> list[ProducePartitionResult]:
    return [(p, 0, 1000 + p, -1, 0, None, ()) for p in range(partitions)]


def kio_produce_response(version: int, results: list[ProducePartitionResult]) -> Any:
    """What apis/produce.py `_response` builds."""
    partition_cls = response_class(0, version, "PartitionProduceResponse")
    return build(
        response_class(0, version, "ProduceResponse"),
        responses=(
            build(
                response_class(0, version, "TopicProduceResponse"),
                name=TOPIC,
                partition_responses=tuple(
                    build(
                        partition_cls,
                        index=index,
                        error_code=ErrorCode(error),
                        base_offset=base,
                        log_append_time=None,
                        log_start_offset=start,
                        record_errors=(),
                        error_message=message,
                    )
                    for index, error, base, _t, start, message, _errors in results
                ),
            ),
        ),
        throttle_time=datetime.timedelta(0),
    )


# --- fetch --------------------------------------------------------------------------


def fetch_results(partitions: int) -> list[FetchPartitionResult]:
    return [(p, 0, 5000 + p, 5000 + p, 0, None, BATCH) for p in range(partitions)]


def kio_fetch_response(version: int, results: list[FetchPartitionResult]) -> Any:
    """What apis/fetch.py `_response` builds."""
    partition_cls = response_class(1, version, "PartitionData")
    return build(
        response_class(1, version, "FetchResponse"),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=12345,
        responses=(
            build(
                response_class(1, version, "FetchableTopicResponse"),
                topic=TOPIC,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=index,
                        error_code=ErrorCode(error),
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=start,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    )
                    for index, error, hw, lso, start, _aborted, records in results
                ),
            ),
        ),
    )


def fetch_request_plan(partitions: int) -> list[tuple[int, int, int, int, int, int]]:
    return [(p, 7, 5000 + p, -1, 0, 1 << 20) for p in range(partitions)]


def kio_fetch_request(plan: list[tuple[int, int, int, int, int, int]], version: int = 12) -> Any:
    """What replica_fetcher.py `_fetch` builds (v12)."""
    m = request_module(1, version)
    return build(
        m.FetchRequest,
        replica_id=2,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            m.FetchTopic(
                topic=TOPIC,
                partitions=tuple(
                    build(
                        m.FetchPartition,
                        partition=p,
                        current_leader_epoch=le,
                        fetch_offset=fo,
                        last_fetched_epoch=lfe,
                        log_start_offset=ls,
                        partition_max_bytes=mb,
                    )
                    for p, le, fo, lfe, ls, mb in plan
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def our_fetch_request(plan: list[tuple[int, int, int, int, int, int]]) -> bytes:
    return encode_fetch_request_v12(
        1,
        "broker-2-fetcher",
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[(TOPIC, plan)],
    )


Case = tuple[str, Callable[[], object], Callable[[], object]]


def cases() -> list[Case]:
    out: list[Case] = []
    for version in (9, 8):
        for n in (3, 300):
            header, frame, pos = produce_request_frame(version, n)
            out.append(
                (
                    f"Produce v{version} request decode, {n} partitions",
                    lambda h=header, f=frame, p=pos: decode_request(h, f, p),
                    lambda v=version, f=frame, p=pos: decode_produce_request(v, f, p),
                )
            )
    for n in (3, 300):
        results = produce_results(n)
        response = kio_produce_response(9, results)
        out.append(
            (
                f"Produce v9 response encode, {n} partitions",
                lambda r=response: encode_response(1, r),
                lambda rs=results: encode_produce_response(9, 1, [(TOPIC, rs)]),
            )
        )
        out.append(
            (
                f"Produce v9 response build + encode, {n} partitions",
                lambda rs=results: encode_response(1, kio_produce_response(9, rs)),
                lambda rs=results: encode_produce_response(9, 1, [(TOPIC, list(rs))]),
            )
        )
    for version in (12, 11):
        results = fetch_results(300)
        response = kio_fetch_response(version, results)
        out.append(
            (
                f"Fetch v{version} response encode, 300 partitions",
                lambda r=response: encode_chunked_response(1, r),
                lambda v=version, rs=results: encode_fetch_response(
                    v, 1, [(TOPIC, rs)], session_id=12345
                ),
            )
        )
        out.append(
            (
                f"Fetch v{version} response build + encode, 300 partitions",
                lambda v=version, rs=results: encode_chunked_response(1, kio_fetch_response(v, rs)),
                lambda v=version, rs=results: encode_fetch_response(
                    v, 1, [(TOPIC, list(rs))], session_id=12345
                ),
            )
        )
    plan = fetch_request_plan(300)
    for version in (12, 11):
        frame = encode_request(1, "client", kio_fetch_request(plan, version))[4:]
        header, pos = parse_header(frame)
        out.append(
            (
                f"Fetch v{version} request decode, 300 partitions",
                lambda h=header, f=frame, p=pos: decode_request(h, f, p),
                lambda v=version, f=frame, p=pos: decode_fetch_request(v, f, p),
            )
        )
    out.append(
        (
            "Fetch v12 request build + encode (follower), 300",
            lambda: encode_request(1, "broker-2-fetcher", kio_fetch_request(plan)),
            lambda: our_fetch_request(plan),
        )
    )
    fetch12 = response_type(1, 12)
    for batch in (len(BATCH), 16 << 10):
        results = [(p, 0, 5000, 5000, 0, None, b"\x01" * batch) for p in range(300)]
        payload = b"".join(encode_response(1, kio_fetch_response(12, results)))[4:]
        out.append(
            (
                f"Fetch v12 response decode (follower), 300 x {batch} B",
                lambda pl=payload: decode_response(pl, fetch12),
                lambda pl=payload: decode_fetch_response_v12(pl),
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    args = parser.parse_args()
    rounds, run_s = (5, 0.01) if args.quick else (20, 0.02)
    table = Table(title="Hot-path codecs: µs per message (best of runs)")
    for col in ("message", "kio µs", "ours µs", "kio ÷ ours"):
        table.add_column(col, justify="left" if col == "message" else "right")
    figures: dict[str, dict[str, float]] = {}
    for name, kio_fn, ours_fn in cases():
        kio_us, ours_us = best_pair_us(kio_fn, ours_fn, rounds, run_s)
        ratio = kio_us / ours_us
        figures[name] = {
            "kio_us": round(kio_us, 2),
            "ours_us": round(ours_us, 2),
            "ratio": round(ratio, 2),
        }
        table.add_row(name, f"{kio_us:.1f}", f"{ours_us:.1f}", f"{ratio:.1f}x")
    Console().print(table)
    print("BENCH_JSON " + json.dumps({"codecs": figures}))


if __name__ == "__main__":
    main()
