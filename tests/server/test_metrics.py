"""The Prometheus endpoint of real brokers: what a scrape reads after real clients
produced, consumed and committed, and what it reads when metrics are turned off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from strandline.launcher.local_cluster import CLUSTER_FILE
from tests.cluster.support import create_topic, metric, producer, scrape
from tests.conftest import ClusterFactory
from tests.waiting import wait_until


def test_metrics_after_real_traffic(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1)
    recorded = json.loads((cluster.data_dir / CLUSTER_FILE).read_text())
    url = recorded["brokers"]["1"]["metrics_url"]
    assert url == cluster.brokers[1].metrics_url and url.endswith("/metrics")

    create_topic(cluster, "m", partitions=2, rf=1)
    p = producer(cluster)
    for i in range(100):
        p.produce("m", value=b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "lagging",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([CkTopicPartition("m", 0, 0)])
        seen = 0
        while seen < 50:
            msg = consumer.poll(5)
            assert msg is not None, "no record within 5 s"
            assert msg.error() is None, msg.error()
            seen += 1
        # 50 of partition 0's 50 consumed, then commit only up to offset 20.
        consumer.commit(offsets=[CkTopicPartition("m", 0, 20)], asynchronous=False)
    finally:
        consumer.close()

    s = scrape(cluster, 1)
    assert metric(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") == 100
    assert metric(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="m") > 100 * 100
    assert metric(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="m") > 50 * 100
    assert metric(s, "kafka_server_replicamanager_leadercount") >= 2
    assert metric(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert metric(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert metric(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert metric(s, "kafka_controller_kafkacontroller_controllerepoch") >= 1
    for partition in ("0", "1"):
        labels = {"topic": "m", "partition": partition}
        assert metric(s, "kafka_log_log_logendoffset", **labels) == 50
        assert metric(s, "kafka_cluster_partition_highwatermark", **labels) == 50
        assert metric(s, "kafka_log_log_size", **labels) > 50 * 100
    lag = {"consumergroup": "lagging", "topic": "m", "partition": "0"}
    assert metric(s, "kafka_consumergroup_lag", **lag) == 30
    produce_total = metric(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    requests = sum(
        v
        for (name, labels), v in s.items()
        if name == "kafka_network_requestmetrics_requests_total"
        and ("request", "Produce") in labels
    )
    assert produce_total == requests >= 1
    # Fetches that waited in purgatory (max.wait) show there, not as local time.
    assert metric(s, "kafka_network_requestmetrics_remotetimems_count", request="Fetch") >= 1
    assert metric(s, "kafka_controller_controllerstats_leaderelections_total") >= 2

    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(url.replace("/metrics", "/nope"), timeout=10)
    assert missing.value.code == 404


def test_metrics_off(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1, config={"metrics.port": "0"})
    assert cluster.brokers[1].metrics_url is None
    create_topic(cluster, "quiet", partitions=1, rf=1)
    p = producer(cluster)
    p.produce("quiet", value=b"still works")
    assert p.flush(30) == 0
    wait_until("the broker to keep running", lambda: cluster.is_running(1), timeout_s=5)


def test_topic_metrics_are_removed_when_the_topic_is_deleted() -> None:
    """Per-topic children used to stay exported after the topic was deleted."""
    from typing import Any, cast

    from prometheus_client import generate_latest

    from strandline.server.metrics import BrokerMetrics, BrokerStateCollector

    metrics = BrokerMetrics(cast(Any, None))
    # No broker here: only the counters are exported, not the gauges read from one.
    for collector in list(metrics.registry._collector_to_names):  # noqa: SLF001
        if isinstance(collector, BrokerStateCollector):
            metrics.registry.unregister(collector)
    metrics.bytes_in("gone", 10, 1)
    metrics.bytes_out("gone", 5, replication=False)
    metrics.bytes_in("kept", 7, 1)

    def exported() -> str:
        return generate_latest(metrics.registry).decode()

    assert 'topic="gone"' in exported()
    metrics.topic_deleted("gone")
    metrics.topic_deleted("never-seen")
    assert 'topic="gone"' not in exported()
    assert 'kafka_server_brokertopicmetrics_bytesin_total{topic="kept"} 7.0' in exported()
    metrics.bytes_in("gone", 3, 1)  # a topic made again under the same name starts at 0
    assert 'kafka_server_brokertopicmetrics_bytesin_total{topic="gone"} 3.0' in exported()
