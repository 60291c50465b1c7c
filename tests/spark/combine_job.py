"""A process of its own for test_native_combine's kill test: the per-letter sum on SparkRunner,
available_now, 20 records per micro-batch.

    python -m tests.spark.combine_job BOOTSTRAP SOURCE OUTPUT CHECKPOINT_DIR
"""

from __future__ import annotations

import operator
import sys

from streams_core.spark import SparkRunner
from tests.spark.test_native_combine import by_letter


def main(bootstrap: str, source: str, output: str, checkpoints: str) -> int:
    config = {"application.id": f"combine-{output}", "bootstrap.servers": bootstrap, "spark.master": "local[2]",
              "spark.sql.shuffle.partitions": "2"}  # fmt: skip
    runner = SparkRunner(by_letter(operator.add)(source, output), config, source_options={"maxOffsetsPerTrigger": "20"},
                         progress=False)  # fmt: skip
    runner.run("available_now", checkpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
