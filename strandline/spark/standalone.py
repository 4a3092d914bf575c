"""A Spark standalone cluster on this machine: one master and N workers, each a JVM
started with the pyspark distribution's `bin/spark-class`, so executors run in JVMs
(and Python workers) of their own, as on a real cluster, not inside the driver's.

    with StandaloneCluster(Path("/tmp/spark"), workers=2) as cluster:
        spark = session_builder(cluster.master_url, "job").getOrCreate()

The master's web UI answers `/json/` with the workers it has registered; `start()`
returns once every worker is ALIVE there. `stop()` ends the JVMs it started (SIGTERM,
then SIGKILL after a grace period).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from strandline.coordination.zookeeper_server import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_GRACE_S = 15.0


def spark_home() -> Path:
    """The pyspark distribution: it carries bin/spark-class and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    def __init__(
        self,
        work_dir: Path,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory_per_worker: str = "512m",
    ) -> None:
        self.work_dir = work_dir
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.port = free_port(HOST)
        self.webui_port = free_port(HOST)
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP=HOST,
            SPARK_LOG_DIR=str(self.work_dir / "logs"),
            # The JVMs' own heap: a master or worker daemon needs little.
            SPARK_DAEMON_MEMORY="256m",
        )
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.work_dir / f"{name}.log").open("wb")
        spark_class = spark_home() / "bin" / "spark-class"
        proc = subprocess.Popen(
            [str(spark_class), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._env(),
            cwd=self.work_dir,
            start_new_session=True,  # its own process group: stop() ends the JVM and bash
        )
        log.close()
        self._procs.append(proc)

    def start(self) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn(
                "master",
                [MASTER_CLASS, "--host", HOST, "--port", str(self.port)]
                + ["--webui-port", str(self.webui_port)],
            )
            for i in range(self.workers):
                worker_dir = self.work_dir / f"worker-{i}"
                worker_dir.mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{i}",
                    [WORKER_CLASS, self.master_url, "--host", HOST]
                    + ["--cores", str(self.cores_per_worker)]
                    + ["--memory", self.memory_per_worker]
                    + ["--webui-port", str(free_port(HOST)), "--work-dir", str(worker_dir)],
                )
            self.wait_for_workers(START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict[str, object]:
        """The master's `/json/` answer (workers, cores, applications)."""
        url = f"http://{HOST}:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            answer: dict[str, object] = json.load(response)
        return answer

    def alive_workers(self) -> int:
        workers = self.status().get("workers", [])
        assert isinstance(workers, list)
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def wait_for_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        alive = 0
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"a Spark daemon exited with {proc.returncode}; see {self.work_dir}/*.log"
                    )
            try:
                alive = self.alive_workers()
            except (OSError, urllib.error.URLError, ValueError):
                alive = 0  # the master's UI is not up yet
            if alive >= self.workers:
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"{alive} of {self.workers} Spark workers registered within {timeout_s:.0f}s; "
            f"see {self.work_dir}/*.log"
        )

    def stop(self) -> None:
        # Workers first (they would otherwise try to reconnect to a gone master).
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
