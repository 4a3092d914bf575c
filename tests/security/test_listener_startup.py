"""A listener the broker can not serve is refused at start-up with one clear line,
before the broker touches ZooKeeper (the issue: `SSL://` used to be served as plain
text)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Nothing listens there: a broker that got past its config would hang on ZooKeeper.
UNREACHABLE_ZK = "127.0.0.1:1"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "FOO://127.0.0.1:0"}, "listener FOO has no entry in listener.security"),
        (
            {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL"},
            "listener SSL needs a certificate",
        ),
        (
            {"listeners": "SSL://127.0.0.1:0"},
            "inter-broker listener PLAINTEXT",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "GSSAPI",
            },
            "GSSAPI",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
            },
            "needs sasl.username and sasl.password",
        ),
    ],
)
def test_unservable_listener_is_refused_at_start_up(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    config = tmp_path / "server.properties"
    props = {"broker.id": "1", "zookeeper.connect": UNREACHABLE_ZK, "log.dirs": str(tmp_path)}
    config.write_text("".join(f"{k}={v}\n" for k, v in {**props, **settings}.items()))
    done = subprocess.run(
        [sys.executable, "-m", "strandline", "broker", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: "), done.stderr[:300]
