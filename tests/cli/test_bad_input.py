"""Bad input to every tool: a non-zero exit and exactly one line naming the cause; no
traceback, no librdkafka `%3|…|FAIL|` noise, and a dead address fails fast (docs/tools.md).

The table runs the command line's own entry point (`strandline.cli.main.main`, argv
handling and last-resort error line included) in this process, with file descriptors
1 and 2 captured, so librdkafka's C-level writes to stderr would be caught too; a
process start per row costs tens of seconds on a busy machine. One call runs as a real
subprocess to check `--verbose`.

Two clusters serve the table: a plaintext one without an authorizer, and a
SASL_PLAINTEXT one for the wrong password.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strandline.cli.main import main
from strandline.launcher.local_cluster import CLIENT_PROPERTIES
from tests.cluster.support import create_topic
from tests.conftest import ClusterFactory

DEAD = "127.0.0.1:1"  # nothing listens on port 1: the connection is refused at once
# A dead address must not keep a tool retrying (acls --list took 31 s, topics 12 s).
FAST_S = 8.0


def strandline(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "strandline", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
    )
    return done, time.monotonic() - started


def in_process(
    args: list[str], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, float]:
    """(exit code, stderr, seconds) of `strandline ARGS` through its entry point."""
    monkeypatch.setattr(sys, "argv", ["strandline", *args])
    capfd.readouterr()
    started = time.monotonic()
    code: int | str | None = 0
    try:
        main()
    except SystemExit as e:
        code = e.code
    seconds = time.monotonic() - started
    _, err = capfd.readouterr()
    return (code if isinstance(code, int) else 1), err, seconds


def test_bad_input_to_every_tool_is_one_line(
    cluster_factory: ClusterFactory,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = cluster_factory(1, auto_create_topics_enable="false")
    secured = cluster_factory(1, security="sasl_plaintext")
    create_topic(plain, "t", partitions=1, rf=1)
    p = ("--bootstrap-server", plain.bootstrap)

    good = (secured.data_dir / CLIENT_PROPERTIES).read_text()
    wrong = tmp_path / "wrong-password.properties"
    wrong.write_text(
        "\n".join(
            "sasl.password=not-the-password" if line.startswith("sasl.password=") else line
            for line in good.splitlines()
        )
        + "\n"
    )
    s = ("--bootstrap-server", secured.bootstrap, "--command-config", str(wrong))

    bad_json = tmp_path / "plan.json"
    bad_json.write_text('{"version": 1, "partitions": [')
    moves = tmp_path / "move.json"
    moves.write_text('{"version": 1, "topics": [{"topic": "t"}]}')
    no_partitions = tmp_path / "no-partitions.json"
    no_partitions.write_text('{"version": 1}')

    table: list[tuple[list[str], str]] = [
        # topics
        (["topics", *p, "--create", "--topic", "x", "--partitions", "-3",
          "--replication-factor", "1"], "--partitions must be at least 1"),
        (["topics", *p, "--alter", "--topic", "t", "--partitions", "-1"],
         "--partitions must be at least 1"),
        (["topics", *p, "--create", "--topic", "x", "--replica-assignment", "1:x"],
         "--replica-assignment"),
        (["topics", "--bootstrap-server", DEAD, "--list"], "connection refused"),
        (["topics", "--bootstrap-server", "no-such-host.invalid:9092", "--list"],
         "unknown host"),
        (["topics", *s, "--list"], "authentication failed: invalid credentials"),
        # perf
        (["perf", "produce", *p, "--topic", "t", "--num-records", "1",
          "--producer-props", "foo.bar=1"], "foo.bar"),
        (["perf", "produce", *p, "--topic", "t", "--num-records", "1",
          "--producer-props", "linger.ms=abc"], "linger.ms=abc"),
        (["perf", "consume", *p, "--topic", "t", "--messages", "1",
          "--consumer-props", "no.such=1"], "no.such"),
        (["perf", "produce", "--bootstrap-server", DEAD, "--topic", "t", "--num-records", "1"],
         "connection refused"),
        (["perf", "produce", *s, "--topic", "t", "--num-records", "1"],
         "authentication failed: invalid credentials"),
        # acls
        (["acls", "--bootstrap-server", DEAD, "--list"], "connection refused"),
        (["acls", *p, "--list"], "SECURITY_DISABLED"),
        (["acls", *s, "--list"], "authentication failed: invalid credentials"),
        # configs
        (["configs", "--bootstrap-server", DEAD, "--describe", "--topic", "t"],
         "connection refused"),
        (["configs", *s, "--describe", "--topic", "t"], "invalid credentials"),
        # groups, log-dirs, transactions
        (["groups", "--bootstrap-server", DEAD, "--list"], "connection refused"),
        (["groups", *s, "--list"], "invalid credentials"),
        (["log-dirs", "--describe", "--bootstrap-server", DEAD], "connection refused"),
        (["transactions", "--bootstrap-server", DEAD, "list"], "connection refused"),
        # reassign, elect
        (["reassign", *p, "--execute", "--reassignment-json-file", str(bad_json)],
         f"--reassignment-json-file {bad_json}: not valid JSON"),
        (["reassign", *p, "--execute", "--reassignment-json-file", str(no_partitions)],
         f"{no_partitions}: not the expected JSON: missing key 'partitions'"),
        (["reassign", *p, "--generate", "--topics-to-move-json-file", str(moves),
          "--broker-list", "1,9"], "no broker 9"),
        (["reassign", "--bootstrap-server", DEAD, "--list"], "connection refused"),
        (["elect", *p, "--election-type", "sideways", "--all-topic-partitions"],
         "PREFERRED or UNCLEAN"),
        (["elect", *p, "--election-type", "PREFERRED", "--path-to-json-file", str(bad_json)],
         f"--path-to-json-file {bad_json}: not valid JSON"),
        # dump-log
        (["dump-log", "--files", str(tmp_path / "missing.log")], "no such file"),
    ]  # fmt: skip

    problems = []
    for args, says in table:
        code, stderr, seconds = in_process(args, capfd, monkeypatch)
        lines = [line for line in stderr.splitlines() if line.strip()]
        why = None
        if code == 0:
            why = "exit 0"
        elif "Traceback" in stderr or "%3|" in stderr or "%6|" in stderr:
            why = "traceback or librdkafka noise"
        elif len(lines) != 1:
            why = f"{len(lines)} lines"
        elif not lines[0].startswith("error: ") or says not in lines[0]:
            why = f"does not say {says!r}"
        elif DEAD in args and seconds > FAST_S:
            why = f"took {seconds:.0f} s"
        if why is not None:
            problems.append(f"{' '.join(args)}: {why}\n{stderr[-1500:]}")
    assert not problems, "\n\n".join(problems)


def test_verbose_shows_librdkafka_s_log_lines() -> None:
    """What the one line summarises is still there for whoever asks."""
    done, _ = strandline("--verbose", "topics", "--bootstrap-server", DEAD, "--list")
    assert done.returncode == 1
    assert "strandline.librdkafka" in done.stderr and "Connection refused" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: cannot reach {DEAD}: connection refused"
