"""SparkSessions we build (demo, tests, benchmarks): Python workers run this interpreter.

PySpark starts its Python workers (UDFs, the data source's readers and writers) with
`PYSPARK_PYTHON`, else `spark.pyspark.python`, else `python3` from PATH. A job run as
`.venv/bin/python job.py` without an activated venv would get a `python3` that cannot
import `strandline`. So wherever the session is ours, both name `sys.executable`; where
it is not, set them yourself (docs/spark.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Small executors for the standalone cluster (strandline/spark/standalone.py): one
# core and 512 MiB each, so two workers fit a 2-core CI machine.
STANDALONE_EXECUTOR_CONF = {
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.cores.max": "2",
}


def python_conf() -> dict[str, str]:
    """The Spark settings that make driver and executor Python this interpreter, its
    workers forked by our daemon (strandline/spark/worker_daemon.py)."""
    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.python.daemon.module": "strandline.spark.worker_daemon",
    }


def use_this_python() -> None:
    """Also the environment variable: PySpark's driver side reads only
    `PYSPARK_PYTHON` for Python UDFs (SparkContext.pythonExec), not the setting."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session_builder(master: str, app_name: str) -> Any:
    """A SparkSession builder for `master` (local[N] or spark://host:port) whose Python
    workers are this interpreter, bound to 127.0.0.1, without the web UI."""
    from pyspark.sql import SparkSession

    use_this_python()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
    )
    for key, value in python_conf().items():
        builder = builder.config(key, value)
    if master.startswith("spark://"):
        for key, value in STANDALONE_EXECUTOR_CONF.items():
            builder = builder.config(key, value)
    return builder
