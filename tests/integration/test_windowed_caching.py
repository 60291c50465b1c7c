"""A cached windowed count on the real broker: output and changelog move only at commit, queries see the cache."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streams_core import (
    Grouped,
    KafkaStreams,
    Materialized,
    QueryableStoreTypes,
    Serdes,
    State,
    StreamsBuilder,
    TimeWindows,
)
from tests.integration.apps.harness import end_offsets
from tests.integration.streams_testkit import FAST_CONFIG, wait_until
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()
WINDOW_MS = 3_600_000


@pytest.mark.slow
async def test_a_cached_windowed_count_writes_output_and_changelog_only_at_commit(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    suffix = unique_topic("wcache")
    app_id, source, sink = f"app-{suffix}", f"in-{suffix}", f"out-{suffix}"
    changelog = f"{app_id}-counts-changelog"
    for topic in (source, sink):
        await create_topic(bootstrap_servers, topic, partitions=1)
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).group_by_key(Grouped.with_(S, S))
     .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).count(Materialized.as_("counts"))
     .to_stream().map(lambda windowed, count: (windowed.key, count)).to(sink, key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    config = {
        **FAST_CONFIG,
        "application.id": app_id,
        "bootstrap.servers": bootstrap_servers,
        "state.dir": str(tmp_path / "state"),
        "commit.interval.ms": 600_000,  # no commit during the test but the one at close
    }
    now = int(time.time() * 1000)
    records = [Rec(key.encode(), b"x", timestamp_ms=now + i) for i in range(10) for key in ("a", "b", "c")]
    await produce(bootstrap_servers, source, records)

    streams = KafkaStreams(builder.build(), config)
    await streams.start()
    closed = False
    try:
        await streams.wait_for_state(State.RUNNING, timeout=60)
        store = streams.store("counts", QueryableStoreTypes.window_store())

        def counted() -> bool:
            try:
                return {kv.key.key: kv.value for kv in store.fetch_all(0, now + 10)} == {"a": 10, "b": 10, "c": 10}
            except Exception:
                return False

        await wait_until(counted, 60, message="queries to see every count (from the cache)")
        for _ in range(20):  # a burst of queries of every kind
            assert [kv.value for kv in store.fetch("a", "c", 0, now + 10)] == [10, 10, 10]
            assert [kv.value for kv in store.fetch("b", 0, now + 10)] == [10]
            assert len(list(store.all())) == 3
        assert sum((await end_offsets(bootstrap_servers, sink)).values()) == 0, "no output before a commit"
        assert sum((await end_offsets(bootstrap_servers, changelog)).values()) == 0, "no changelog before a commit"
        await streams.close()
        closed = True
    finally:
        if not closed:
            await streams.close()
    output = await read_all(bootstrap_servers, sink)
    assert sorted((r.key, int.from_bytes(r.value, "big")) for r in output) == [(b"a", 10), (b"b", 10), (b"c", 10)], (
        "one update per windowed key, at the commit"
    )
    assert sum((await end_offsets(bootstrap_servers, changelog)).values()) == 3
