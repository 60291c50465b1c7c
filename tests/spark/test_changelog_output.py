"""Spark's output is a changelog our runtime can materialise: same bytes, murmur2 partitions, tombstones.

A KafkaStreams app reads the Spark job's output topic with `builder.table()` and serves it over
the REST layer; the answers are the values the Spark job computed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from api import create_app
from streams_core import (
    KafkaStreams,
    Materialized,
    QueryableStoreTypes,
    Serdes,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from streams_core.common.partitioner import default_partition
from streams_core.runtime.kafka_streams import State
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, FAST_CONFIG

EVENTS = [("u1", "active"), ("u2", "active"), ("u3", "active"), ("u1", "away"), ("u2", "deleted"), ("u4", "active"),
          ("u3", "deleted"), ("u3", "back"), ("u5", "deleted")]


def latest_status(events_topic: str, output: str) -> Topology:
    """Each user's latest status; "deleted" removes the user (a tombstone downstream)."""
    builder = StreamsBuilder()
    (builder.stream(events_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
     .map_values(lambda status: None if status == "deleted" else status)
     .to_table(materialized=Materialized.as_("status"))
     .to_stream()
     .to(output))
    return builder.build()


async def test_spark_output_is_a_changelog_served_by_kafka_streams_over_rest(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("changelog")
    events, output = f"events-{suffix}", f"status-{suffix}"
    await create_topic(bootstrap_servers, events, partitions=2)
    await create_topic(bootstrap_servers, output, partitions=3)
    await produce(bootstrap_servers, events, [Rec(k.encode(), v.encode(), timestamp_ms=BASE_TS + i) for i, (k, v) in enumerate(EVENTS)])

    # Caching off: every update and delete reaches the output (with caching on, the keyed stage forwards
    # a key's last update per micro-batch, as the record cache per commit, and a delete only of a key
    # stored before the micro-batch).
    runner = SparkRunner(latest_status(events, output), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers,
                                                         "statestore.cache.max.bytes": 0}, spark=spark)
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")

    records = await read_all(bootstrap_servers, output)
    assert all(r.key is not None and r.partition == default_partition(r.key, 3) for r in records), "murmur2 by key"
    tombstones = {r.key for r in records if r.value is None}
    # Kafka Streams with caching off forwards the delete of u5 (never present) too, as Java's
    # KTableSource does.
    with TopologyTestDriver(latest_status("e", "o"), {"application.id": "d", "statestore.cache.max.bytes": 0}) as driver:
        driver.create_input_topic("e", Serdes.String(), Serdes.String()).pipe_record_list(
            [(k, v, i) for i, (k, v) in enumerate(EVENTS)])
        uncached = driver.create_output_topic("o", Serdes.String(), Serdes.String()).read_records_to_list()
    assert tombstones == {r.key.encode() for r in uncached if r.value is None} == {b"u2", b"u3", b"u5"}
    assert not any(h[0].startswith("streams-core") for r in records for h in r.headers), "no runner headers on outputs"

    builder = StreamsBuilder()
    builder.table(output, Materialized.as_("user-status"), key_serde=Serdes.String(), value_serde=Serdes.String())
    streams = KafkaStreams(builder.build(), {"application.id": f"view-{suffix}", "bootstrap.servers": bootstrap_servers,
                                             "state.dir": str(tmp_path / "view"), **FAST_CONFIG})
    expected = {"u1": "away", "u3": "back", "u4": "active"}
    await streams.start()
    try:
        await streams.wait_for_state(State.RUNNING, timeout=60)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            store = streams.store("user-status", QueryableStoreTypes.key_value_store())
            if dict(store.all()) == expected:
                break
            assert asyncio.get_running_loop().time() < deadline, f"the view holds {dict(store.all())}"
            await asyncio.sleep(0.2)

        app = create_app(streams)
        async with app.router.lifespan_context(app), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://view") as client:
            assert (await client.get("/state/keyvalue/user-status/u1")).json() == {"key": "u1", "value": "away"}
            assert (await client.get("/state/keyvalue/user-status/u2")).status_code == 404
            everything = (await client.get("/state/keyvalues/user-status/all")).json()
            assert everything == [{"key": k, "value": v} for k, v in sorted(expected.items())]
    finally:
        await streams.close()
