"""The alert rules `cluster up` writes, checked and unit-tested by Prometheus' own
promtool (Debian's `prometheus` package, installed by `make setup`): each alert fires on
the series it is about, not before its `for:` has passed, and stays quiet when healthy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from strandline.launcher import prometheus_setup


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is missing: run `make setup` (Debian's prometheus)"
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    config = prometheus_setup.write(tmp_path, {1: "127.0.0.1:9404", 2: "127.0.0.1:9405"})
    return config.parent


def test_the_written_config_and_rules_pass_promtool_check(rules_dir: Path) -> None:
    done = promtool("check", "config", "prometheus.yml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 rules found" in done.stdout


# Series are `initial+incrementxcount` per minute (interval 1m). The defaults: offline,
# under-min-ISR, no controller and broker down fire after 1m; under-replicated and ISR
# shrinking after 5m; consumer lag above 10,000 after 10m.
UNIT_TESTS = (Path(__file__).parent / "alerts_test.yml").read_text()


def test_every_alert_fires_after_its_for_and_only_then(rules_dir: Path) -> None:
    (rules_dir / "alerts_test.yml").write_text(UNIT_TESTS)
    done = promtool("test", "rules", "alerts_test.yml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_wrong_expectation_fails_promtool(rules_dir: Path) -> None:
    """The unit tests above can fail: the same file expecting the offline alert a minute
    early is refused."""
    early = UNIT_TESTS.replace(
        "      - eval_time: 2m\n        alertname: KafkaOfflinePartitions\n        exp_alerts: []",
        "      - eval_time: 2m\n        alertname: KafkaOfflinePartitions\n        exp_alerts:\n"
        "          - exp_labels: {severity: critical}",
    )
    assert early != UNIT_TESTS
    (rules_dir / "alerts_test.yml").write_text(early)
    done = promtool("test", "rules", "alerts_test.yml", cwd=rules_dir)
    assert done.returncode != 0


def test_a_new_cluster_in_the_same_directory_keeps_the_metrics_ports(tmp_path: Path) -> None:
    """What `cluster up` reads back so that Prometheus' `instance` labels survive a
    restart: the ports the directory's last cluster recorded, taken again when free."""
    import json
    import socket

    from strandline.coordination.zookeeper_server import port_free
    from strandline.launcher.local_cluster import _recorded_metrics_ports

    recorded = tmp_path / "cluster.json"
    recorded.write_text(
        json.dumps({"brokers": {"1": {"metrics_port": 9404}, "2": {"metrics_port": None}}})
    )
    assert _recorded_metrics_ports(recorded) == {1: 9404}
    assert _recorded_metrics_ports(tmp_path / "missing.json") == {}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert not port_free(taken.getsockname()[1])
