"""Fixtures for the PySpark source/sink tests: one SparkSession per test run, and a
real Strandline cluster per test (tests/conftest.py's `cluster_factory`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strandline.spark import register


@pytest.fixture
def bootstrap(cluster_factory: Any) -> str:
    """A one-broker Strandline cluster (real ZooKeeper, broker process) per test."""
    return str(cluster_factory(brokers=1).bootstrap)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("strandline-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
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
    cluster = request.getfixturevalue("cluster_factory")(brokers=1)
    return str(cluster.bootstrap)
