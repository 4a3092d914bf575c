"""The real Prometheus (Debian's package) run on the files `cluster up` writes: it
discovers every broker through file_sd, scrapes them, and when a broker is killed the
alerts fire, as seen through Prometheus' HTTP API. The intervals and `for:` durations are
shortened (AlertTiming) so that this takes seconds, not minutes."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from strandline.coordination.zookeeper_server import free_port
from strandline.launcher import prometheus_setup
from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import consume_all, create_topic, producer
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "strandline-dashboard.json"

FAST = prometheus_setup.AlertTiming(
    scrape_interval="1s",
    evaluation_interval="1s",
    under_replicated_for="2s",
    under_min_isr_for="1s",
    offline_for="1s",
    no_controller_for="1s",
    broker_down_for="1s",
    isr_shrink_for="1s",
    consumer_lag_for="1s",
    rate_window="30s",
)


def api(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}/api/v1/{path}", timeout=5) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return body["data"]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Any]:
    """start(config) -> the base URL of a Prometheus reading that config."""
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus is missing: run `make setup` (Debian's prometheus)"
    started: list[subprocess.Popen[bytes]] = []

    def start(config: Path) -> str:
        port = free_port()
        log = (tmp_path / "prometheus.log").open("wb")
        started.append(
            subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        base = f"http://127.0.0.1:{port}"
        wait_until("Prometheus to answer", lambda: _ready(base), timeout_s=30)
        return base

    yield start
    for process in started:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def _firing(base: str) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for alert in api(base, "alerts")["alerts"]:
        if alert["state"] == "firing":
            out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    return out


def _endpoints(cluster: LocalCluster) -> dict[int, str]:
    return {b: f"{p.host}:{p.metrics_port}" for b, p in cluster.brokers.items()}


def test_a_killed_broker_fires_alerts_in_prometheus(
    cluster_factory: ClusterFactory, prometheus: Any
) -> None:
    cluster = cluster_factory(2)
    written = cluster.data_dir / "prometheus"
    # `cluster up` wrote the files with the operator's timing: the same writer, faster.
    assert json.loads((written / "targets.json").read_text()) == prometheus_setup.targets(
        cluster.data_dir.name, _endpoints(cluster)
    )
    config = prometheus_setup.write(cluster.data_dir, _endpoints(cluster), FAST)
    create_topic(cluster, "watched", partitions=2, rf=2)
    # Traffic and a committed group, so that every per-topic and per-group series exists.
    sender = producer(cluster)
    for i in range(10):
        sender.produce("watched", f"v{i}".encode(), partition=i % 2)
    assert sender.flush(30) == 0
    assert len(consume_all(cluster, "watched", partitions=2)) == 10
    group = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "dashboard"})
    try:
        group.commit(offsets=[CkTopicPartition("watched", 0, 1)], asynchronous=False)
    finally:
        group.close()
    base = prometheus(config)

    wait_until(
        "both brokers discovered and scraped",
        lambda: (
            len(targets := api(base, "targets")["activeTargets"]) == 2
            and all(t["health"] == "up" for t in targets)
        ),
        timeout_s=30,
    )
    # Healthy: one controller, nothing under-replicated, no alert firing.
    wait_until(
        "one active controller in Prometheus",
        lambda: (
            [
                r["value"][1]
                for r in api(
                    base,
                    "query?query=sum(kafka_controller_kafkacontroller_activecontrollercount)",
                )["result"]
            ]
            == ["1"]
        ),
        timeout_s=30,
    )
    process = api(base, "query?query=process_resident_memory_bytes")["result"]
    assert len(process) == 2 and all(float(r["value"][1]) > 0 for r in process)
    # Right after start KafkaNoActiveController may fire on `absent()` before the first
    # scrape (its real `for:` is a minute); once scraped, all is quiet.
    wait_until("no alert firing on the healthy cluster", lambda: _firing(base) == {}, 15)

    _dashboard_queries_answer(base)

    cluster.kill(2, "KILL")
    firing = wait_until(
        "KafkaBrokerDown and KafkaUnderReplicatedPartitions to fire",
        lambda: (
            (f := _firing(base)).keys() >= {"KafkaBrokerDown", "KafkaUnderReplicatedPartitions"}
            and f
        ),
        timeout_s=60,
    )
    assert [a["broker"] for a in firing["KafkaBrokerDown"]] == ["2"]
    survivor = _endpoints(cluster)[1]
    assert [a["instance"] for a in firing["KafkaUnderReplicatedPartitions"]] == [survivor]
    # Every partition still has a leader: nothing is offline.
    assert "KafkaOfflinePartitions" not in firing


def _dashboard_queries_answer(base: str) -> None:
    """Every query of the Grafana dashboard in docs/ is valid PromQL and names only
    metrics this cluster really exports."""
    exported = set(api(base, "label/__name__/values"))
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert len(exprs) > 20
    for expr in exprs:
        query = expr.replace("$job", "strandline").replace("$__rate_interval", "30s")
        names = set(re.findall(r"\b((?:kafka|process|python)_[a-z_]+|up)\b", query))
        assert names and names <= exported, (expr, names - exported)
        api(base, "query?" + urllib.parse.urlencode({"query": query}))
