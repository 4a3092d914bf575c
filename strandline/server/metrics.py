"""The broker's Prometheus metrics, under the names Kafka's JMX beans get from the
Prometheus JMX exporter (`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`
becomes `kafka_server_replicamanager_underreplicatedpartitions`), so dashboards and
alerts written for Kafka work unchanged. docs/metrics.md lists them all.

Counters are bumped where things happen (requests, bytes, state-change events, log
flushes). Gauges are read from the broker's state when scraped, so they cannot drift
from it. The endpoint is served on the broker's own event loop: a scrape reads the
state between two events, never while one is half applied.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    Summary,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from strandline.protocol.codec import api_name

if TYPE_CHECKING:
    from strandline.server.broker import Broker

# Request phases in milliseconds, Kafka's RequestMetrics split.
_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# state-change.log events that are Kafka meters of their own.
_EVENT_COUNTERS = {
    "isr-shrink": "kafka_server_replicamanager_isrshrinks",
    "isr-expand": "kafka_server_replicamanager_isrexpands",
    "leader-election": "kafka_controller_controllerstats_leaderelections",
    "unclean-leader-election": "kafka_controller_controllerstats_uncleanleaderelections",
}


@dataclass
class RequestTiming:
    """One request's moments (perf_counter seconds), filled in as it moves along."""

    api_key: int
    api_version: int
    received: float
    started: float = 0.0
    handled: float = 0.0
    dequeued: float = 0.0
    remote_wait: list[float] = field(default_factory=list)


class NoMetrics:
    """What the broker uses when `metrics.port` is not set: every hook does nothing, so
    the cost of metrics can be measured against their absence."""

    enabled = False

    def request_done(self, timing: RequestTiming, sent: float) -> None:
        pass

    def bytes_in(self, topic: str, size: int, records: int) -> None:
        pass

    def bytes_out(self, topic: str, size: int, replication: bool) -> None:
        pass

    def replication_bytes_in(self, size: int) -> None:
        pass

    def fetcher_round(self, seconds: float) -> None:
        pass

    def topic_deleted(self, topic: str) -> None:
        pass

    def state_change(self, event: str) -> None:
        pass

    def log_flushed(self, seconds: float) -> None:
        pass

    async def serve(self, host: str, port: int) -> None:
        pass

    async def stop(self) -> None:
        pass


class BrokerMetrics(NoMetrics):
    enabled = True

    def __init__(self, broker: Broker) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        # What one watches on any Python process: process_* (resident memory, CPU
        # seconds, open file descriptors against their limit) and python_info.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        # Request counts and phase times are recorded in plain lists and turned into
        # Prometheus families only when scraped: prometheus_client's labels() and
        # observe() cost ~1 us each, seven per request (a tenth of a small produce).
        self.request_stats = RequestStats()
        r.register(self.request_stats)
        self.bytes_in_total = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes produced by clients (BytesInPerSec)",
            ["topic"],
            registry=r,
        )
        self.messages_in_total = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records produced by clients (MessagesInPerSec)",
            ["topic"],
            registry=r,
        )
        self.bytes_out_total = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Bytes fetched by consumers (BytesOutPerSec)",
            ["topic"],
            registry=r,
        )
        self.replication_bytes_out_total = Counter(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Bytes fetched by follower replicas (ReplicationBytesOutPerSec)",
            registry=r,
        )
        self.replication_bytes_in_total = Counter(
            "kafka_server_brokertopicmetrics_replicationbytesin",
            "Bytes this broker fetched as a follower (ReplicationBytesInPerSec)",
            registry=r,
        )
        self.fetcher_round_time = Summary(
            "kafka_server_replicafetchermanager_roundtimems",
            "A follower's replication round: its Fetch sent, the response appended, "
            "in milliseconds (the next fetch goes out at once)",
            registry=r,
        )
        self.events = {
            event: Counter(name, f"state-change.log {event} events", registry=r)
            for event, name in _EVENT_COUNTERS.items()
        }
        self.flush_time = Histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time to fsync a log's segments, in milliseconds (LogFlushRateAndTimeMs)",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        r.register(BrokerStateCollector(broker))
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._server: asyncio.base_events.Server | None = None

    # -- hooks -----------------------------------------------------------------------

    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, looked up once: prometheus_client validates and
        hashes the labels on every call, a cost paid per request and per partition."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def request_done(self, timing: RequestTiming, sent: float) -> None:
        self.request_stats.record(timing, sent)

    def bytes_in(self, topic: str, size: int, records: int) -> None:
        self._child(self.bytes_in_total, topic).inc(size)
        self._child(self.messages_in_total, topic).inc(records)

    def bytes_out(self, topic: str, size: int, replication: bool) -> None:
        if replication:
            self.replication_bytes_out_total.inc(size)
        else:
            self._child(self.bytes_out_total, topic).inc(size)

    def replication_bytes_in(self, size: int) -> None:
        self.replication_bytes_in_total.inc(size)

    def fetcher_round(self, seconds: float) -> None:
        self.fetcher_round_time.observe(seconds * 1000)

    def topic_deleted(self, topic: str) -> None:
        """Drop the topic's children (Kafka's removeMetrics on deletion): a deleted
        topic is no longer exported, and a broker that sees topics come and go does not
        grow without bound."""
        for metric in (self.bytes_in_total, self.messages_in_total, self.bytes_out_total):
            if self._children.pop((id(metric), (topic,)), None) is not None:
                metric.remove(topic)

    def state_change(self, event: str) -> None:
        counter = self.events.get(event)
        if counter is not None:
            counter.inc()

    def log_flushed(self, seconds: float) -> None:
        self.flush_time.observe(seconds * 1000)

    # -- the endpoint ------------------------------------------------------------------

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def serve(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._answer, host, port, reuse_address=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Just enough HTTP/1.0 for a scraper or curl: GET /metrics, then close."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method != "GET" or path not in ("/metrics", "/"):
                status, body, kind = "404 Not Found", b"GET /metrics\n", "text/plain"
            else:
                status, body, kind = "200 OK", self.render(), CONTENT_TYPE_LATEST
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()


_PHASES = (
    ("requestqueue", "From the frame read to its handler starting"),
    ("local", "Handling on this broker, waits in purgatory excluded"),
    ("remote", "Waiting in purgatory (acks=all replication, fetch long-poll)"),
    ("responsequeue", "Waiting behind earlier responses on the connection"),
    ("responsesend", "Writing the response to the socket"),
    ("total", "From the frame read to the response written"),
)


class _ApiTimes:
    """One API's phase histograms: per phase, a count per bucket (not cumulative) and
    the sum in milliseconds."""

    __slots__ = ("buckets", "sums")

    def __init__(self) -> None:
        self.buckets = [[0] * (len(_MS_BUCKETS) + 1) for _ in _PHASES]
        self.sums = [0.0] * len(_PHASES)


class RequestStats(Collector):
    """Kafka's RequestMetrics (RequestsPerSec and the *TimeMs phases per API), kept as
    plain counts on the request path and rendered as Prometheus families when scraped."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], int] = {}
        self._times: dict[int, _ApiTimes] = {}

    def record(self, timing: RequestTiming, sent: float) -> None:
        key = (timing.api_key, timing.api_version)
        self._counts[key] = self._counts.get(key, 0) + 1
        times = self._times.get(timing.api_key)
        if times is None:
            times = self._times[timing.api_key] = _ApiTimes()
        remote = sum(timing.remote_wait)
        buckets, sums = times.buckets, times.sums
        for i, seconds in enumerate(
            (
                timing.started - timing.received,
                timing.handled - timing.started - remote,
                remote,
                timing.dequeued - timing.handled,
                sent - timing.dequeued,
                sent - timing.received,
            )
        ):
            ms = seconds * 1000 if seconds > 0 else 0.0
            buckets[i][bisect_left(_MS_BUCKETS, ms)] += 1
            sums[i] += ms

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and version (RequestsPerSec)",
            labels=["request", "version"],
        )
        for (api_key, version), count in sorted(self._counts.items()):
            requests.add_metric([api_name(api_key), str(version)], count)
        yield requests
        for i, (phase, title) in enumerate(_PHASES):
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{phase}timems",
                f"{title} in milliseconds ({phase.capitalize()}TimeMs)",
                labels=["request"],
            )
            for api_key, times in sorted(self._times.items()):
                cumulative = list(accumulate(times.buckets[i]))
                family.add_metric(
                    [api_name(api_key)],
                    [(str(float(b)), c) for b, c in zip(_MS_BUCKETS, cumulative, strict=False)]
                    + [("+Inf", cumulative[-1])],
                    times.sums[i],
                )
            yield family


class BrokerStateCollector(Collector):
    """The gauges: counted from the replica manager, the controller, the fetchers and
    the group coordinator at scrape time."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        b = self.broker
        rm = b.replica_manager
        me = b.broker_id
        led = [h for h in rm.partitions.values() if h.leader_state is not None]
        yield _gauge(
            "kafka_server_replicamanager_partitioncount", "Replicas hosted", len(rm.partitions)
        )
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led", len(led))
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            sum(1 for h in led if len(h.isr) < len(h.replicas)),
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here whose ISR is below min.insync.replicas",
            sum(1 for h in led if len(h.isr) < h.min_insync_replicas),
        )
        yield _gauge(
            "kafka_server_replicamanager_offlinereplicacount",
            "Replicas hosted here whose log directory failed",
            len(rm.storage_failures),
        )
        ctx = b.controller.ctx if hasattr(b, "controller") else None
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the broker that is the controller",
            0 if ctx is None else 1,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_controllerepoch",
            "The controller epoch: the controller's own, else the newest this broker has seen",
            rm.controller_epoch if ctx is None else ctx.epoch,
        )
        offline = 0
        if ctx is not None:
            live = ctx.live_broker_ids
            offline = sum(
                1
                for tp, state in ctx.partition_states.items()
                if tp.topic not in ctx.topics_to_delete and state.leader not in live
            )
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (reported by the controller only)",
            offline,
        )
        yield _gauge(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest lag, in records, of a follower replica here behind its leader's HW",
            max(b.fetcher_manager.lags.values(), default=0),
            labels={"clientId": "Replica"},
        )
        sessions = rm.fetch_sessions
        yield _gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "KIP-227 fetch sessions this broker holds (followers' and consumers')",
            len(sessions),
        )
        yield _gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions held over all fetch sessions",
            sessions.partitions_cached(),
        )
        yield from self._per_partition(rm.partitions.values(), me)
        yield self._group_lag()

    @staticmethod
    def _per_partition(hosted: Any, me: int) -> Iterator[Metric]:
        families = {
            name: GaugeMetricFamily(name, text, labels=["topic", "partition"])
            for name, text in (
                ("kafka_log_log_size", "Bytes on disk of the partition's log"),
                ("kafka_log_log_logendoffset", "The replica's log end offset (LEO)"),
                ("kafka_log_log_logstartoffset", "The replica's log start offset"),
                ("kafka_cluster_partition_highwatermark", "The partition's HW as seen here"),
                ("kafka_cluster_partition_insyncreplicascount", "ISR size (leaders only)"),
            )
        }
        for h in hosted:
            labels = [h.tp.topic, str(h.tp.partition)]
            families["kafka_log_log_size"].add_metric(labels, h.log.size_in_bytes)
            families["kafka_log_log_logendoffset"].add_metric(labels, h.log.log_end_offset)
            families["kafka_log_log_logstartoffset"].add_metric(labels, h.log.log_start_offset)
            families["kafka_cluster_partition_highwatermark"].add_metric(labels, h.high_watermark)
            if h.is_leader(me):
                families["kafka_cluster_partition_insyncreplicascount"].add_metric(
                    labels, len(h.isr)
                )
        yield from families.values()

    def _group_lag(self) -> Metric:
        """Lag of each group this broker coordinates, on the partitions it hosts (the
        HW is only known where a replica lives): HW minus the committed offset."""
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset",
            labels=["consumergroup", "topic", "partition"],
        )
        coordinator = self.broker.group_service.coordinator
        partitions = self.broker.replica_manager.partitions
        for group_id in coordinator.group_ids():
            group = coordinator.group(group_id)
            if group is None:
                continue
            for tp, committed in group.offsets.items():
                hosted = partitions.get(tp)
                if hosted is not None:
                    family.add_metric(
                        [group_id, tp.topic, str(tp.partition)],
                        max(hosted.high_watermark - committed.offset, 0),
                    )
        return family


def _gauge(name: str, text: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    family = GaugeMetricFamily(name, text, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), value)
    return family


def metrics_for(broker: Broker, port: int | None) -> NoMetrics:
    return BrokerMetrics(broker) if port is not None else NoMetrics()
