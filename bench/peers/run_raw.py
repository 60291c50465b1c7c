"""The aiokafka loops of bench/runtime_throughput.py in the bench/peers harness (pass-through only).

    .venv/bin/python bench/peers/run_raw.py BOOTSTRAP INPUT OUTPUT RECORDS COMMIT_MS naive|batch

`naive` awaits one `send()` per record; `batch` fills one `create_batch()` per input partition and
hands it over with `send_batch()`. Both are `runtime_throughput.run_raw` itself (its `.upper()`
leaves the harness's upper-case input as it is), with the peers' producer settings; the process
exits once its output holds every record.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import runtime_throughput


def main() -> int:
    bootstrap, input_topic, output, records, commit_ms, kind = sys.argv[1:7]
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    runtime_throughput.COMMIT_INTERVAL_MS = int(commit_ms)
    runtime_throughput.CLIENT_OVERRIDES.update({"producer.linger.ms": 100, "producer.batch.size": 16384,
                                                "producer.compression.type": "none"})
    asyncio.run(runtime_throughput.run_raw(bootstrap, input_topic, int(records), 0.05, batched=kind == "batch",
                                           output=output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
