"""What IQv2's layer costs over the store path it is built on: one in-process key read, no broker.

    flock /tmp/bench.lock .venv/bin/python bench/iqv2_overhead.py               (20,000 reads a kind)
    flock /tmp/bench.lock .venv/bin/python bench/iqv2_overhead.py --reads 2000  (a quick run)

One KafkaStreams instance (one inline stream thread) on the fake cluster counts three words into
the store `counts` (tests/unit/runtime/harness.py); then, on its loop, the same key of partition 0
is read back to back:

  store path   `streams.store_queries.query(StoreRead(... "get" ..., with_position=True))`: the bare
               read below IQv2 (runtime/queries/store_host.py; what the REST layer's get took before it
               went through IQv2)
  iqv2         `await streams.query(StateQueryRequest...KeyQuery...with_partitions({0}))`: the
               same read through IQv2 (request, per-partition result, position, failure mapping)
  rest read    `api.reads.read_key(...)`: the REST layer's key get of a local key, an IQv2
               KeyQuery of the key's partition through the same machinery (no HTTP)

Printed: the best of three rounds, microseconds per read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.reads import read_key  # noqa: E402
from streams_core import KeyQuery, QueryableStoreTypes, StateQueryRequest  # noqa: E402
from streams_core.runtime.queries.store_host import Deadline, StoreQuery, StoreRead  # noqa: E402
from streams_core.testing import FakeKafkaCluster  # noqa: E402
from tests.unit.runtime.harness import counting_topology, eventually, produce_words, running, streams_config  # noqa: E402


async def best_of_three(call: Callable[[], Awaitable[Any]], reads: int) -> float:
    for _ in range(reads // 10):  # warm up
        await call()
    rounds = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(reads):
            await call()
        rounds.append((time.perf_counter() - started) / reads * 1e6)
    return min(rounds)


async def main(reads: int) -> None:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 1)
    with tempfile.TemporaryDirectory() as state:
        async with running(cluster, counting_topology(), streams_config(Path(state))) as app:
            produce_words(cluster, "a b c")
            await eventually(lambda: len(cluster.records("out")) == 3, what="the counts")
            streams = app.streams
            read = StoreRead("counts", QueryableStoreTypes.key_value_store(), "get", ("a",), StoreQuery(0), True)
            request = StateQueryRequest.in_store("counts").with_query(KeyQuery.with_key("a")).with_partitions({0})

            def rest() -> Awaitable[Any]:
                query = KeyQuery.with_key("a")
                return read_key(streams, "counts", False, query, 0, stale=False, max_lag=None, bound=None, timeout_s=1.0, deadline=Deadline.after(5))

            path = await best_of_three(lambda: streams.store_queries.query(read, Deadline.after(5)), reads)
            iqv2 = await best_of_three(lambda: streams.query(request), reads)
            rest_read = await best_of_three(rest, reads)
            print(f"store path  {path:6.1f} us per key read")
            print(f"iqv2        {iqv2:6.1f} us per key read ({iqv2 / path:.1f}x)")
            print(f"rest read   {rest_read:6.1f} us per key read ({rest_read / path:.1f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().reads))
