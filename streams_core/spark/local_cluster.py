"""A Spark standalone master and workers on 127.0.0.1, started from the pyspark installation.

For tests and benchmarks that need executors in processes of their own (user functions shipped
as on a cluster) without a cluster: `with local_standalone_cluster(work_dir, workers=2) as url:`
then `spark.master = url`. Each process runs in a session of its own and is stopped (SIGTERM,
then SIGKILL) when the block ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["local_standalone_cluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_standalone_cluster(work_dir: Path, workers: int = 1, cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """Start a master and `workers` workers (`cores` and `memory` each); yields the master's URL.

    Executors write their logs under `work_dir` (`app-*/<executor>/stderr`).
    """
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    port = _free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work_dir / "logs"),
           "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    url = f"spark://127.0.0.1:{port}"

    def start(*args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([str(spark_class), *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip

    processes = [start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                       "--webui-port", str(_free_port()))]  # fmt: skip
    try:
        for _ in range(workers):
            processes.append(start("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                                   "--work-dir", str(work_dir / "work")))  # fmt: skip
        yield url
    finally:
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
