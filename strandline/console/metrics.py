"""Per-replica LEO and HW from the brokers' Prometheus endpoints (docs/metrics.md).

The Kafka protocol only shows the leader's high watermark; what HW/LEO diagrams draw — every
replica's log end offset beside the HW it knows — is in each broker's
`kafka_log_log_logendoffset` and `kafka_cluster_partition_highwatermark` gauges, which
the broker computes at scrape time from its replica state.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

LOG_END_OFFSET = "kafka_log_log_logendoffset"
LOG_START_OFFSET = "kafka_log_log_logstartoffset"
HIGH_WATERMARK = "kafka_cluster_partition_highwatermark"
CONTROLLER_EPOCH = "kafka_controller_kafkacontroller_controllerepoch"
REPLICA_GAUGES = frozenset({LOG_END_OFFSET, LOG_START_OFFSET, HIGH_WATERMARK})
REQUESTS = "kafka_network_requestmetrics_requests_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
COUNTERS = frozenset({REQUESTS, BYTES_IN, MESSAGES_IN, BYTES_OUT})
# A stopped (SIGSTOP) broker accepts the connection and never answers: short, so one such
# broker does not hold up a page that refreshes every second.
SCRAPE_TIMEOUT_S = 1.5
RATE_WINDOW_S = 2.0


@dataclass(frozen=True)
class ReplicaGauges:
    log_end_offset: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None


@dataclass
class BrokerScrape:
    broker: int
    error: str | None = None
    # (topic, partition) -> gauges of the replica this broker hosts; after a failed
    # scrape, those of the last one that worked (a dead broker's log is still on disk,
    # and HW/LEO diagrams keep drawing it)
    replicas: dict[tuple[str, int], ReplicaGauges] = field(default_factory=dict)
    scraped_at: float | None = None  # when `replicas` were read
    # True only when this very scrape answered: `replicas` may be the last good ones
    fresh: bool = False
    # counter name (with its `request` label for requests) -> value, this scrape's
    counters: dict[str, float] = field(default_factory=dict)
    # per second since the previous good scrape; empty until there are two
    rates: dict[str, float] = field(default_factory=dict)


def parse(broker: int, text: str) -> BrokerScrape:
    values: dict[tuple[str, int], dict[str, int]] = {}
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in COUNTERS:
                key = sample.name
                if sample.name == REQUESTS:
                    key = f"{REQUESTS}:{sample.labels.get('request', '?')}"
                counters[key] = counters.get(key, 0.0) + float(sample.value)
                continue
            if sample.name not in REPLICA_GAUGES:
                continue
            topic, partition = sample.labels.get("topic"), sample.labels.get("partition")
            if topic is None or partition is None or not partition.isdigit():
                continue
            values.setdefault((topic, int(partition)), {})[sample.name] = int(sample.value)
    return BrokerScrape(
        broker,
        replicas={
            tp: ReplicaGauges(
                log_end_offset=v.get(LOG_END_OFFSET),
                log_start_offset=v.get(LOG_START_OFFSET),
                high_watermark=v.get(HIGH_WATERMARK),
            )
            for tp, v in values.items()
        },
        counters=counters,
    )


def scrape_one(broker: int, url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> BrokerScrape:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            text = answer.read().decode("utf-8", errors="replace")
    except urllib.error.URLError as exc:
        return BrokerScrape(broker, error=f"{url}: {exc.reason}")
    except OSError as exc:  # timeouts and resets after the connection was made
        return BrokerScrape(broker, error=f"{url}: {exc}")
    try:
        scraped = parse(broker, text)
        scraped.scraped_at = time.time()
        scraped.fresh = True
        return scraped
    except ValueError as exc:
        return BrokerScrape(broker, error=f"{url}: not Prometheus text ({exc})")


class Scraper:
    """Scrapes several brokers side by side, so the slowest sets the page's latency."""

    def __init__(self, urls: dict[int, str]) -> None:
        self.urls = dict(urls)
        # Several pages scrape at once (every open tab polls): room for each of them.
        self._pool = ThreadPoolExecutor(max_workers=max(4, min(32, 4 * len(urls))))
        self._last: dict[int, BrokerScrape] = {}
        # broker -> (when, counters) the rates are measured against, and the last rates
        self._base: dict[int, tuple[float, dict[str, float]]] = {}
        self._rates: dict[int, dict[str, float]] = {}
        self._lock = threading.Lock()

    def scrape(self, brokers: list[int] | None = None) -> dict[int, BrokerScrape]:
        wanted = {b: u for b, u in self.urls.items() if brokers is None or b in brokers}
        futures = {b: self._pool.submit(scrape_one, b, url) for b, url in wanted.items()}
        answers = {b: future.result() for b, future in futures.items()}
        out = {}
        # Only the bookkeeping is locked: two pages scraping at once do not wait for
        # each other's slow broker.
        with self._lock:
            for b, scraped in answers.items():
                last = self._last.get(b)
                if scraped.error is None:
                    self._rate(b, scraped)
                    self._last[b] = scraped
                elif last is not None:
                    scraped.replicas, scraped.scraped_at = last.replicas, last.scraped_at
                out[b] = scraped
        return out

    def _rate(self, broker: int, scraped: BrokerScrape) -> None:
        """Counters per second over at least RATE_WINDOW_S (pages scrape every second or
        so, several at once: a shorter window is noise)."""
        now = scraped.scraped_at or time.time()
        base = self._base.get(broker)
        if base is None:
            self._base[broker] = (now, scraped.counters)
        elif now - base[0] >= RATE_WINDOW_S:
            elapsed = now - base[0]
            # A labelled counter absent from the base was never incremented: 0 then (a
            # follower that just became leader starts counting its topic's messages).
            self._rates[broker] = {
                k: max(v - base[1].get(k, 0.0), 0.0) / elapsed for k, v in scraped.counters.items()
            }
            self._base[broker] = (now, scraped.counters)
        scraped.rates = dict(self._rates.get(broker, {}))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
