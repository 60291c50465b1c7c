"""The REST layer over DSL stores: the README's word count (inferred key serdes, timestamped values)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from api import create_app
from streams_core import Materialized, Serdes, StreamsBuilder, TimeWindows, Topology
from streams_core.runtime.assignment import StreamsMetadataState
from tests.api.fakes import FakeKafkaStreams

WINDOW = 60_000


def word_count() -> Topology:
    """Counts per word, overall (`word-count`) and per minute (`windowed-word-count`)."""
    builder = StreamsBuilder()
    words = (
        builder.stream("TextLinesTopic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
    )
    words.count(Materialized.as_("word-count"))
    words.windowed_by(TimeWindows.of_size_and_grace(WINDOW, WINDOW)).count(Materialized.as_("windowed-word-count"))
    return builder.build()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A single instance without application.server (so every answer is local), fed three lines."""
    streams = FakeKafkaStreams(None, {0}, StreamsMetadataState({}, None), topology=word_count)
    lines = streams.active_driver.create_input_topic("TextLinesTopic", Serdes.String(), Serdes.String())
    for timestamp, line in ((1_000, "hello world"), (2_000, "Hello streams"), (61_000, "hello again")):
        lines.pipe_input(None, line, timestamp=timestamp)
    app = create_app(streams)
    try:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://wc")
        async with app.router.lifespan_context(app), client:
            yield client
    finally:
        streams.close()


async def test_word_counts(client: httpx.AsyncClient) -> None:
    assert (await client.get("/state/keyvalue/word-count/hello")).json() == {"key": "hello", "value": 3}
    everything = await client.get("/state/keyvalues/word-count/all")
    assert everything.json() == [
        {"key": word, "value": count} for word, count in (("again", 1), ("hello", 3), ("streams", 1), ("world", 1))
    ]
    ranged = await client.get("/state/keyvalues/word-count/range/h/t")
    assert [entry["key"] for entry in ranged.json()] == ["hello", "streams"]


async def test_windowed_word_counts(client: httpx.AsyncClient) -> None:
    answer = await client.get("/state/windowed/windowed-word-count/hello/0/120000")
    assert answer.json() == [
        {"key": "hello", "windowStart": 0, "windowEnd": WINDOW, "value": 2},
        {"key": "hello", "windowStart": WINDOW, "windowEnd": 2 * WINDOW, "value": 1},
    ]
    assert (await client.get("/state/keyvalue/windowed-word-count/hello")).status_code == 404
