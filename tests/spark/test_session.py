"""A job started as `.venv/bin/python job.py`, with no venv on PATH, reads a topic:
its Python workers run the driver's interpreter (strandline/spark/session.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .kafka_helpers import create_topic, produce, unique_topic

JOB = Path(__file__).with_name("spark_job.py")


def test_job_without_the_venv_on_path_reads_a_topic(bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("novenv")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=10)
    # What a user's shell has without `source .venv/bin/activate`: no venv on PATH and
    # no PYSPARK_PYTHON. `python3` from this PATH cannot import strandline.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env["PATH"] = "/usr/bin:/bin"
    assert (
        subprocess.run(
            ["python3", "-c", "import strandline"], env=env, cwd=tmp_path, capture_output=True
        ).returncode
        != 0
    )
    done = subprocess.run(
        [sys.executable, str(JOB), "count", bootstrap, topic, "local[2]"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "count=10" in done.stdout
