"""Fixtures for the PySpark source/sink tests: one SparkSession per test run, and a
real Strandline cluster per test (tests/conftest.py's `cluster_factory`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strandline.spark import register
from strandline.spark.session import session_builder
from strandline.spark.standalone import StandaloneCluster

# These brokers are never killed, so nothing waits for their sessions to expire; and a
# Spark JVM starting beside them on two cores has starved a broker's ZooKeeper pings
# past the 2 s default's ~0.7 s of grace (the broker then lost its session mid-request).
SESSION_TIMEOUT = {"zookeeper_session_timeout_ms": 8000}


@pytest.fixture
def bootstrap(cluster_factory: Any) -> str:
    """A one-broker Strandline cluster (real ZooKeeper, broker process) per test."""
    return str(cluster_factory(brokers=1, **SESSION_TIMEOUT).bootstrap)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        session_builder("local[2]", "strandline-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def project_cluster_bootstrap(request: pytest.FixtureRequest) -> str:
    """A one-broker Strandline cluster: for what Tansu lacks (DeleteRecords, retention)."""
    cluster = request.getfixturevalue("cluster_factory")(brokers=1, **SESSION_TIMEOUT)
    return str(cluster.bootstrap)


@pytest.fixture(scope="session")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone cluster: a master and two workers (1 core, 512 MiB each),
    separate JVMs started with pyspark's bin/spark-class. Jobs reach it as separate
    driver processes (this process already runs a local[2] SparkContext)."""
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2) as cluster:
        yield cluster.master_url
