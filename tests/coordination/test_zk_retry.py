"""Admin requests made for a client wait out a dropped ZooKeeper connection
(KafkaZkClient.retryRequestsUntilConnected), on a real ZooKeeper that we freeze."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError
from kazoo.protocol.connection import _CONNECTION_DROP
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from strandline.coordination import zk_retry
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zk_retry import until_connected
from strandline.coordination.zookeeper_server import ZooKeeperServer
from strandline.errors import RequestTimedOutError
from tests.waiting import wait_until

SESSION_TIMEOUT_MS = 9000


@pytest.fixture
def frozen_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test's own: freezing the session one would stall every
    cluster of this worker."""
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=100, max_session_timeout_ms=10000)
    server.start()
    yield server
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)
    server.stop()


def _during_a_dropped_connection(
    server: ZooKeeperServer, zk: ZkClient, call: Callable[[], object]
) -> object:
    """Run `call()` while its request loses the connection: freeze the server (SIGSTOP)
    so no reply comes, wait for the request to be sent, drop the connection as kazoo's
    own test harness does, thaw the server once kazoo has seen the drop (SUSPENDED).
    Returns what `call()` returned, or the ConnectionLoss it raised."""
    suspended = threading.Event()

    def on_state(state: KazooState) -> None:
        if state == KazooState.SUSPENDED:
            suspended.set()

    wait_until("kazoo to be connected (back from an earlier drop)", lambda: zk.kazoo.connected)
    zk.add_state_listener(on_state)
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    with ThreadPoolExecutor(1) as pool:
        outcome = pool.submit(call)
        try:
            # Sent, awaiting the reply that cannot come.
            wait_until("the request to be sent", lambda: zk.kazoo._pending, interval_s=0.005)
            zk.kazoo._call(_CONNECTION_DROP, zk.kazoo.handler.async_result())
            assert suspended.wait(10), "kazoo never saw the connection drop"
        finally:
            os.kill(server.pid, signal.SIGCONT)
        try:
            return outcome.result(timeout=30)
        except ConnectionLoss as e:
            return e
        finally:
            zk.kazoo.remove_listener(on_state)


@pytest.mark.cluster  # a ZooKeeper server of its own
def test_a_config_write_waits_out_a_dropped_connection(
    frozen_zookeeper: ZooKeeperServer,
) -> None:
    connect = frozen_zookeeper.connect_string + "/app"
    with ZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS).connect() as zk:
        session = zk.session_id
        # The fault is real: sent alone, the write loses its connection.
        bare = _during_a_dropped_connection(
            frozen_zookeeper, zk, lambda: zk.set_topic_config("t", {"retention.ms": "1"})
        )
        assert isinstance(bare, ConnectionLoss)

        retried = _during_a_dropped_connection(
            frozen_zookeeper,
            zk,
            lambda: until_connected(zk.set_topic_config, "t", {"retention.ms": "2"}),
        )
        assert retried is None, f"the retried write failed: {retried!r}"
        assert zk.get_topic_config("t") == {"retention.ms": "2"}
        assert zk.session_id == session  # the same session, reconnected: not a new one


def _failing(times: int, error: Exception) -> Callable[[], str]:
    calls = []

    def request() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return f"answered on attempt {len(calls)}"

    return request


def test_losses_are_retried_and_other_errors_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk_retry, "_UNTIL_CONNECTED", KazooRetry(max_tries=-1, delay=0.001))
    assert until_connected(_failing(3, ConnectionLoss())) == "answered on attempt 4"
    with pytest.raises(NoNodeError):  # ZooKeeper's answer, for the caller to handle
        until_connected(_failing(1, NoNodeError()))


def test_past_the_deadline_the_client_gets_request_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        zk_retry, "_UNTIL_CONNECTED", KazooRetry(max_tries=-1, delay=0.01, deadline=0.1)
    )
    with pytest.raises(RequestTimedOutError, match="ZooKeeper unreachable") as raised:
        until_connected(_failing(10**6, ConnectionLoss()))
    assert raised.value.code.name == "request_timed_out"
