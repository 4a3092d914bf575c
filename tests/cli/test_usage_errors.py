"""Bad flags get one line, as Kafka's tools print them: not a usage box, not a traceback.
No cluster is needed: every call fails before it would connect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CALLS = [
    (["topics", "--bogus"], "No such option: --bogus"),
    (["topics", "--list", "--bootstrap-server"], "requires an argument"),
    (["configs", "--bogus"], "No such option: --bogus"),
    (["log-dirs", "describe", "--bogus"], "No such option: --bogus"),
    (["groups", "--bogus"], "No such option: --bogus"),
    (["reassign", "--bogus"], "No such option: --bogus"),
    (["elect", "--bootstrap-server", "h:1", "--bogus"], "No such option: --bogus"),
    (["verify-replicas", "--bogus"], "No such option: --bogus"),
    (["perf", "produce", "--bogus"], "No such option: --bogus"),
    (["perf", "consume", "--topic", "t", "--bootstrap-server", "h:1"], "Missing option"),
    (["console", "--bogus"], "No such option: --bogus"),
    (["dump-log", "--bogus"], "No such option: --bogus"),
    (["chaos", "run", "--seconds", "x"], "Invalid value"),
]


def strandline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strandline", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("args", "says"), CALLS, ids=[" ".join(a) for a, _ in CALLS])
def test_a_bad_flag_is_one_line(args: list[str], says: str) -> None:
    done = strandline(*args)
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]
    assert "--help" in lines[0]


def test_a_command_config_that_cannot_work_is_refused_in_one_line(tmp_path: Path) -> None:
    """The shared admin client reads --command-config for every tool (docs/security.md): SASL
    without credentials is refused before any connection, the same way everywhere."""
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    for args in (
        ["reassign", "--bootstrap-server", "h:1", "--list", "--command-config", str(config)],
        ["elect", "--bootstrap-server", "h:1", "--election-type", "preferred",
         "--all-topic-partitions", "--command-config", str(config)],
        ["verify-replicas", "--bootstrap-server", "h:1", "--command-config", str(config)],
        ["groups", "--bootstrap-server", "h:1", "--list", "--command-config", str(config)],
        ["log-dirs", "describe", "--bootstrap-server", "h:1", "--command-config", str(config)],
        ["transactions", "--bootstrap-server", "h:1", "--command-config", str(config), "list"],
        ["console", "--bootstrap-server", "h:1", "--command-config", str(config)],
    ):  # fmt: skip
        done = strandline(*args)
        assert done.returncode == 1, done
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, done.stderr
        assert (
            lines[0].startswith("error: ") and "needs sasl.username and sasl.password" in lines[0]
        )
