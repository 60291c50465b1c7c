"""The word-count application: the README's DSL word count plus a 1-minute windowed count.

Input `TextLinesTopic` (lines of text), stores `word-count` (count per lower-cased word) and
`windowed-word-count` (counts per word and 1-minute tumbling window, kept a day for queries),
output `WordsWithCountsTopic` (word -> count as an 8-byte long).
"""

from __future__ import annotations

from streams_core import Materialized, Serdes, StreamsBuilder, TimeWindows, Topology

__all__ = ["INPUT_TOPIC", "OUTPUT_TOPIC", "STORE", "WINDOWED_STORE", "build_topology"]

INPUT_TOPIC = "TextLinesTopic"
OUTPUT_TOPIC = "WordsWithCountsTopic"
STORE = "word-count"
WINDOWED_STORE = "windowed-word-count"
WINDOW_MS = 60_000
WINDOW_RETENTION_MS = 24 * 3600 * 1000


def build_topology(
    input_topic: str = INPUT_TOPIC, output_topic: str = OUTPUT_TOPIC, window_ms: int = WINDOW_MS, *, windowed: bool = True
) -> Topology:
    """The word count topology; `window_ms` is the tumbling window size of the windowed count.

    `windowed=False` leaves the windowed count out (the Spark engine runs the plain count only).
    """
    builder = StreamsBuilder()
    words = (
        builder.stream(input_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
    )
    words.count(Materialized.as_(STORE)).to_stream().to(output_topic, value_serde=Serdes.Long())
    if not windowed:
        return builder.build()
    words.windowed_by(TimeWindows.of_size_with_no_grace(window_ms)).count(
        Materialized.as_(WINDOWED_STORE).with_retention(max(WINDOW_RETENTION_MS, window_ms))
    )
    return builder.build()
