"""The native stream-stream join's per-task step alone, on `spark_workloads.py`'s join input (no Spark).

    .venv/bin/python bench/spark_join_step.py --records 1000000

`make_join(N)` split by key into 4 tasks as 4 partitions would split it, each task's records as
one pandas frame through `StreamJoinTask.handleInputRows` (a fake state handle, the task's first
micro-batch): the CPU seconds of the Python work the native query does per record, and the
joined records checked against the expected count.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_workloads import HOUR, join_topology, make_join

TASKS = 4


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from streams_core.spark import SparkRunner
    from streams_core.spark.native_count import CountKeys
    from streams_core.spark.native_stream_join import StreamJoinTask
    from tests.spark.test_native_join_count import _Handle

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per side")
    n = parser.parse_args(argv).records
    data = make_join(n, time.time() * 1000 - 4 * HOUR)
    topics = {"left": "left", "right": "right"}
    runner = SparkRunner(join_topology(topics, "out"), {"application.id": "step", "bootstrap.servers": "127.0.0.1:9"})
    (query,) = runner.plan().queries
    assert query.native is not None and query.native.kind == "stream-join"
    tasks: dict[int, list[tuple[object, ...]]] = {task: [] for task in range(TASKS)}
    for role, records in data.inputs.items():
        offsets = [0] * TASKS
        for key, value, ts in records:
            task = zlib.crc32(key) % TASKS
            tasks[task].append((topics[role], task, offsets[task], ts, key, value, []))
            offsets[task] += 1
    seconds, joined = 0.0, 0
    for task, rows in tasks.items():
        frame = pd.DataFrame(rows, columns=["topic", "partition", "offset", "timestamp", "key", "value", "headers"])
        step = StreamJoinTask(CountKeys(query.spec.topology, query.spec.props, query.native), {})
        step.init(_Handle())  # type: ignore[arg-type]  # the fake has the calls the task makes
        started = time.process_time()
        joined += sum(len(out) for out in step.handleInputRows((task,), iter([frame]), None))
        seconds += time.process_time() - started
    expected = sum(data.expected.values())
    print(f"{n:,} per side over {TASKS} tasks: {seconds:.2f} s CPU in the per-task step "
          f"({seconds / (2 * n) * 1e6:.2f} us a record), {joined:,} joined (expected {expected:,})")
    return 0 if joined == expected else 1


if __name__ == "__main__":
    sys.exit(main())
