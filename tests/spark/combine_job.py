"""A process of its own for the kill tests: test_native_combine's per-letter sum, or
test_native_session_count's session count (JOB "sessions"), on SparkRunner, available_now, 20
records per micro-batch.

    python -m tests.spark.combine_job BOOTSTRAP SOURCE OUTPUT CHECKPOINT_DIR [JOB]
"""

from __future__ import annotations

import operator
import sys

from streams_core.spark import SparkRunner
from tests.spark.test_native_combine import by_letter


def main(bootstrap: str, source: str, output: str, checkpoints: str, job: str = "sum") -> int:
    config = {"application.id": f"combine-{output}", "bootstrap.servers": bootstrap, "spark.master": "local[2]",
              "spark.sql.shuffle.partitions": "2"}  # fmt: skip
    if job == "sessions":
        from tests.spark.test_native_session_count import sessions_topology

        topology = sessions_topology(source, output, 10_000, 20_000, origin=0)  # this process's T0 is not the test's
    else:
        topology = by_letter(operator.add)(source, output)
    runner = SparkRunner(topology, config, source_options={"maxOffsetsPerTrigger": "20"},
                         progress=False)  # fmt: skip
    runner.run("available_now", checkpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
