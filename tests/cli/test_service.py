"""`strandline service` without a running broker (start and restart run in
tests/deploy/test_guide.py, on the guide's six brokers)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.support import tool

run, ok, fails = tool("service")


def config(tmp_path: Path) -> Path:
    path = tmp_path / "broker-7.properties"
    path.write_text(
        "broker.id=7\nlisteners=PLAINTEXT://127.0.0.1:1\nzookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'data'}\nstrandline.logs.dir={tmp_path / 'logs'}\n"
    )
    return path


def test_status_and_stop_of_a_broker_that_does_not_run(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    result = run("status", "--config", str(cfg))
    assert result.exit_code == 3 and "broker 7 is not running" in result.stdout
    assert "broker 7 was not running" in ok("stop", "--config", str(cfg))
    # A stale pid file naming some other process is not taken for the broker.
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "broker.pid").write_text("1\n")
    assert run("status", "--config", str(cfg)).exit_code == 3


def test_a_broker_that_cannot_start_is_reported(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    result = run("start", "--config", str(cfg), "--timeout", "5")
    # Nothing listens on ZooKeeper port 1: the broker never serves; it is stopped again
    # and the error ends with the tail of its output.
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: broker 7 did not answer Metadata on 127.0.0.1:1")
    assert "so it was stopped again; tail of " in result.stderr
    assert run("status", "--config", str(cfg)).exit_code == 3
    missing = fails("start", "--config", str(tmp_path / "nope.properties"))
    assert "nope.properties" in missing
