"""The ZooKeeper launcher: real Debian ZooKeeper, loopback only, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from strandline.coordination import zookeeper_server
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zookeeper_server import (
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    four_letter_word,
    process_group_alive,
)


def test_session_zookeeper_answers_four_letter_words(zookeeper: ZooKeeperServer) -> None:
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.port}"
    assert "Mode: standalone" in four_letter_word("127.0.0.1", zookeeper.port, "srvr")
    assert four_letter_word("127.0.0.1", zookeeper.port, "ruok") == "imok"
    cfg = (zookeeper.data_dir / "zoo.cfg").read_text().splitlines()
    for line in (
        "tickTime=100",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",
        "minSessionTimeout=200",
        "maxSessionTimeout=10000",
        "4lw.commands.whitelist=srvr,ruok,stat",
    ):
        assert line in cfg


@pytest.mark.cluster  # starts a JVM
def test_context_manager_starts_and_kills_the_jvm(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk", tick_time_ms=100) as server:
        pid = server.pid
        assert pid is not None and process_group_alive(pid)
        with ZkClient(server.connect_string + "/app", connect_timeout_s=10).connect() as zk:
            zk.create_topic("t", {0: [1]}, {})
            assert zk.get_all_topics() == ["t"]
    assert not process_group_alive(pid)
    assert server.pid is None


@pytest.mark.cluster  # starts a JVM
def test_temporary_data_dir_is_removed(tmp_path: Path) -> None:
    server = ZooKeeperServer(tick_time_ms=100).start()
    data_dir = server.data_dir
    assert (data_dir / "zoo.cfg").exists()
    server.stop()
    assert not data_dir.exists()


def test_missing_jars_fail_loudly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(zookeeper_server, "JAVA_DIR", tmp_path)
    with pytest.raises(ZooKeeperUnavailableError, match="(?s)zookeeper.jar.*apt-get install"):
        ZooKeeperServer(tmp_path / "zk").start()


def test_missing_java_fails_loudly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ZooKeeperUnavailableError, match="`java` is not on PATH"):
        ZooKeeperServer(tmp_path / "zk").start()
