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
# A stopped (SIGSTOP) broker accepts the connection and never answers: short, so one such
# broker does not hold up a page that refreshes every second.
SCRAPE_TIMEOUT_S = 1.5


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


def parse(broker: int, text: str) -> BrokerScrape:
    values: dict[tuple[str, int], dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
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
        return scraped
    except ValueError as exc:
        return BrokerScrape(broker, error=f"{url}: not Prometheus text ({exc})")


class Scraper:
    """Scrapes several brokers side by side, so the slowest sets the page's latency."""

    def __init__(self, urls: dict[int, str]) -> None:
        self.urls = dict(urls)
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(urls))))
        self._last: dict[int, BrokerScrape] = {}
        self._lock = threading.Lock()

    def scrape(self, brokers: list[int] | None = None) -> dict[int, BrokerScrape]:
        wanted = {b: u for b, u in self.urls.items() if brokers is None or b in brokers}
        futures = {b: self._pool.submit(scrape_one, b, url) for b, url in wanted.items()}
        out = {}
        with self._lock:
            for b, future in futures.items():
                scraped = future.result()
                last = self._last.get(b)
                if scraped.error is None:
                    self._last[b] = scraped
                elif last is not None:
                    scraped.replicas, scraped.scraped_at = last.replicas, last.scraped_at
                out[b] = scraped
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
