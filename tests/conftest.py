"""Shared fixtures: one real ZooKeeper per test session, a fresh chroot per test, and
local clusters of real broker processes.

Missing java / ZooKeeper / kcat makes a test FAIL with a clear message: the suite
never silently skips the parts that need real software.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from strandline.coordination.zookeeper_server import ZooKeeperServer, ZooKeeperUnavailableError

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster

# pytest-xdist hands its workers COLUMNS=80; the tools read COLUMNS as the width to cut
# table cells at, so a tool run in a worker would cut what the same test reads whole
# when run alone. Tests that want a width pass their own.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

# Tiers (pytest markers, registered in pyproject.toml). A test's tier follows from what
# it needs, so nobody has to remember to tag it: a real ZooKeeper (and so brokers) makes
# it `cluster`; Spark, a browser or root's network namespaces put it in their own tier;
# the rest is `pure` and runs with `make test-fast`.
# Modules that start brokers, a peer broker or namespaces without the fixtures below.
_TIERS = ("pure", "cluster", "spark", "browser", "root")
_TIER_BY_FOLDER = {"spark": "spark", "faults": "root", "chaos": "root", "deploy": "root"}
_TIER_BY_MODULE = {
    "test_console_browser.py": "browser",
    "test_checker.py": "pure",
    "test_worker_errors.py": "pure",
    "test_timeline.py": "pure",
    "test_consumer_stamps.py": "pure",
    "test_nemesis_plan.py": "pure",
    "test_partition_rules.py": "pure",
    "test_clients_roundtrip.py": "cluster",
    "test_connection.py": "cluster",
    "test_listener_startup.py": "cluster",
    "test_usage_errors.py": "cluster",
    "test_local_cluster.py": "cluster",
    "test_reassign_throttle.py": "cluster",
    "test_disk_full.py": "cluster",
    "test_idempotent_failover.py": "cluster",
    "test_reassignment_failover.py": "cluster",
    "test_client_groups.py": "cluster",
    "test_kcat_group.py": "cluster",
    "test_service.py": "cluster",
    "test_rolling_restart.py": "cluster",
    "test_units.py": "pure",
}
_CLUSTER_FIXTURES = {"zookeeper", "zk_connect", "cluster_factory"}


def tier_of(item: pytest.Item) -> str:
    for tier in _TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    path = Path(str(item.fspath))
    if path.name in _TIER_BY_MODULE:
        return _TIER_BY_MODULE[path.name]
    for folder in path.parts:
        if folder in _TIER_BY_FOLDER:
            return _TIER_BY_FOLDER[folder]
    if _CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "cluster"
    return "pure"


# The order modules start in, by their heaviest test: xdist hands modules out in
# collection order, so the long ones (namespaces, Spark, clusters) go first and the
# many short pure ones fill in at the end, instead of a Spark module starting last and
# running alone for minutes.
_START_ORDER = ("root", "spark", "browser", "cluster", "pure")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first: dict[str, int] = {}
    for item in items:
        tier = tier_of(item)
        item.add_marker(getattr(pytest.mark, tier))
        module = str(item.fspath)
        first[module] = min(first.get(module, len(_START_ORDER)), _START_ORDER.index(tier))
    items.sort(key=lambda item: first[str(item.fspath)])  # stable: a module stays in order


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole session; small ticks make session expiry fast."""
    server = ZooKeeperServer(
        tmp_path_factory.mktemp("zookeeper"),
        tick_time_ms=100,
        min_session_timeout_ms=200,
        max_session_timeout_ms=10000,
    )
    try:
        server.start()
    except ZooKeeperUnavailableError as exc:
        pytest.fail(f"this test needs a real ZooKeeper: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """`127.0.0.1:<port>/<chroot>`: a fresh, empty namespace for this test."""
    return f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(
            "this test needs Debian's `kcat`: `apt-get install -y kcat` (or `make setup`)",
            pytrace=False,
        )
    return path


ClusterFactory = Callable[..., "LocalCluster"]


@pytest.fixture
def cluster_factory(
    zookeeper: ZooKeeperServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ClusterFactory]:
    """`cluster_factory(brokers=1, security="plaintext", **overrides)` -> a started
    LocalCluster (`security`: ssl, sasl_plaintext or sasl_ssl, see `LocalCluster.up`).

    Overrides are server.properties keys with dots spelled as underscores
    (`min_insync_replicas=2`) or passed verbatim via `config={"min.insync.replicas": "2"}`.
    Every cluster reuses the session ZooKeeper under its own chroot and is stopped at
    teardown; a broker that died unexpectedly gets the tail of its broker.out printed.
    """
    from strandline.launcher.local_cluster import LocalCluster

    clusters: list[LocalCluster] = []

    def make(
        brokers: int = 1,
        config: dict[str, str] | None = None,
        *,
        security: str = "plaintext",
        **overrides: Any,
    ) -> LocalCluster:
        # A short session lets a killed broker's znode vanish quickly (the session
        # ZooKeeper clamps timeouts to [200, 10000] ms).
        settings = {"zookeeper.session.timeout.ms": "2000"}
        settings.update({key.replace("_", "."): str(value) for key, value in overrides.items()})
        settings.update(config or {})
        cluster = LocalCluster(tmp_path / f"cluster-{len(clusters)}")
        clusters.append(cluster)
        chroot = f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:12]}"
        cluster.up(brokers, settings, zk_connect=chroot, security=security)
        return cluster

    yield make

    for cluster in clusters:
        for broker_id, tail in cluster.unexpected_deaths().items():
            print(f"\n--- broker {broker_id} died unexpectedly; tail of broker.out ---\n{tail}")
        cluster.stop()
