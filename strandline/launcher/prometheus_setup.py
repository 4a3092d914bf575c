"""What `strandline cluster up` writes for Prometheus, in DIR/prometheus/:

- `targets.json`: file-based service discovery of every broker's metrics endpoint
  (rewritten on each `cluster up`; Prometheus re-reads it without a restart);
- `alerts.yml`: the alert rules (offline partitions, under-min-ISR, under-replicated
  for N minutes, no active controller, ISR shrink rate, consumer lag, broker down);
- `prometheus.yml`: a scrape config reading both, so
  `prometheus --config.file=DIR/prometheus/prometheus.yml` watches the cluster.

The rules use the metric names of docs/metrics.md (Kafka's JMX-exporter names), so they
would read a Kafka cluster's JMX exporter too. `promtool check rules` and
`promtool test rules` check them in tests/monitoring.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

JOB = "strandline"
DIR_NAME = "prometheus"


@dataclass(frozen=True)
class AlertTiming:
    """How soon things are noticed. Operators keep the defaults; a test shortens them so
    that an alert fires within seconds of a broker kill."""

    scrape_interval: str = "15s"
    evaluation_interval: str = "15s"
    # `for:` of the alerts that must not flap on a broker restart or a rolling upgrade.
    under_replicated_for: str = "5m"
    under_min_isr_for: str = "1m"
    offline_for: str = "1m"
    no_controller_for: str = "1m"
    broker_down_for: str = "1m"
    isr_shrink_for: str = "5m"
    consumer_lag_for: str = "10m"
    rate_window: str = "5m"
    consumer_lag_threshold: int = 10_000


def alert_rules(timing: AlertTiming = AlertTiming()) -> str:
    """The rule file. Each alert names what to look at in its description."""
    t = timing
    rules = [
        (
            "KafkaOfflinePartitions",
            "sum(kafka_controller_kafkacontroller_offlinepartitionscount) > 0",
            t.offline_for,
            "critical",
            "{{ $value }} partitions have no live leader",
            "Reads and writes to them fail. `strandline topics --describe "
            "--unavailable-partitions` lists them; bring a replica's broker back, or "
            "`strandline elect --election-type UNCLEAN` as a last resort.",
        ),
        (
            "KafkaUnderMinIsrPartitions",
            "sum by (instance) (kafka_server_replicamanager_underminisrpartitioncount) > 0",
            t.under_min_isr_for,
            "critical",
            "{{ $value }} partitions led by {{ $labels.instance }} are under min.insync.replicas",
            "acks=all produce to them is refused (NOT_ENOUGH_REPLICAS). `strandline topics "
            "--describe --under-min-isr-partitions` lists them.",
        ),
        (
            "KafkaUnderReplicatedPartitions",
            "sum by (instance) (kafka_server_replicamanager_underreplicatedpartitions) > 0",
            t.under_replicated_for,
            "warning",
            "{{ $value }} partitions led by {{ $labels.instance }} are under-replicated",
            "A follower is down or not keeping up. `strandline topics --describe "
            "--under-replicated-partitions` lists them.",
        ),
        (
            "KafkaNoActiveController",
            f"sum(kafka_controller_kafkacontroller_activecontrollercount) != 1 "
            f'or absent(kafka_controller_kafkacontroller_activecontrollercount{{job="{JOB}"}})',
            t.no_controller_for,
            "critical",
            "{{ $value }} active controllers (exactly 1 expected)",
            "Without one, no leader is elected and no ISR change is made. Check ZooKeeper "
            "and `strandline cluster status`.",
        ),
        (
            "KafkaBrokerDown",
            f'up{{job="{JOB}"}} == 0',
            t.broker_down_for,
            "critical",
            "broker {{ $labels.broker }} ({{ $labels.instance }}) does not answer scrapes",
            "The broker process is down or hung; its partitions run on fewer replicas.",
        ),
        (
            "KafkaIsrShrinking",
            f"sum by (instance) (rate(kafka_server_replicamanager_isrshrinks_total"
            f"[{t.rate_window}])) > 0",
            t.isr_shrink_for,
            "warning",
            "ISRs led by {{ $labels.instance }} keep shrinking",
            "Followers fall out of the ISR again and again: slow disks, network or GC, or "
            "replica.lag.time.max.ms too small.",
        ),
        (
            "KafkaConsumerLag",
            f"sum by (consumergroup, topic) (kafka_consumergroup_lag) > {t.consumer_lag_threshold}",
            t.consumer_lag_for,
            "warning",
            "group {{ $labels.consumergroup }} is {{ $value }} records behind on "
            "{{ $labels.topic }}",
            "`strandline groups --describe --group <group>` shows the lag per partition.",
        ),
    ]
    lines = ["groups:", "  - name: strandline", "    rules:"]
    for name, expr, duration, severity, summary, description in rules:
        lines += [
            f"      - alert: {name}",
            f"        expr: {json.dumps(expr)}",
            f"        for: {duration}",
            "        labels:",
            f"          severity: {severity}",
            "        annotations:",
            f"          summary: {json.dumps(summary)}",
            f"          description: {json.dumps(description)}",
        ]
    return "\n".join(lines) + "\n"


def prometheus_config(timing: AlertTiming = AlertTiming()) -> str:
    return (
        "# Written by `strandline cluster up`; run\n"
        "#   prometheus --config.file=prometheus.yml\n"
        "global:\n"
        f"  scrape_interval: {timing.scrape_interval}\n"
        f"  evaluation_interval: {timing.evaluation_interval}\n"
        "rule_files:\n"
        "  - alerts.yml\n"
        "scrape_configs:\n"
        f"  - job_name: {JOB}\n"
        f"    scrape_interval: {timing.scrape_interval}\n"
        "    file_sd_configs:\n"
        "      - files: [targets.json]\n"
        f"        refresh_interval: {timing.scrape_interval}\n"
    )


def targets(cluster_name: str, endpoints: Mapping[int, str]) -> list[dict[str, object]]:
    """file_sd entries: broker id -> host:port of its metrics endpoint."""
    return [
        {"targets": [address], "labels": {"broker": str(broker_id), "cluster": cluster_name}}
        for broker_id, address in sorted(endpoints.items())
    ]


def write(
    data_dir: Path, endpoints: Mapping[int, str], timing: AlertTiming = AlertTiming()
) -> Path:
    """Write the three files into DIR/prometheus/; return the prometheus.yml path."""
    out = data_dir / DIR_NAME
    out.mkdir(parents=True, exist_ok=True)
    (out / "alerts.yml").write_text(alert_rules(timing))
    config = out / "prometheus.yml"
    config.write_text(prometheus_config(timing))
    # Written whole then renamed: Prometheus may read it at any moment.
    scratch = out / "targets.json.tmp"
    scratch.write_text(json.dumps(targets(data_dir.name, endpoints), indent=2) + "\n")
    scratch.replace(out / "targets.json")
    return config
