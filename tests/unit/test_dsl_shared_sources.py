"""Several `stream()` calls on one topic (or pattern, or collection of topics) share one source node.

Translated from Kafka Streams' StreamsBuilderTest (shouldAllowStreamsFromSameTopic,
shouldAllowSubscribingToSamePattern, shouldAllowReadingFromSameCollectionOfTopics,
shouldNotAllowReadingFromOverlappingAndUnequalCollectionOfTopics, shouldThrowWhenSubscribedTo...
ResetPolicies, shouldNotAllowTablesFromSameTopic, shouldNowAllowStreamAndTableFromSameTopic) and
KStreamKStreamSelfJoinTest (shouldMatchInnerJoinWithSelfJoinWithSingleStream / ...WithTwoStreams),
apache/kafka streams/src/test/java/org/apache/kafka/streams/, with their inputs and outputs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from streams_core import (
    Consumed,
    JoinWindows,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.String()


def test_streams_from_same_topic() -> None:
    """shouldAllowStreamsFromSameTopic: one source node; the second stream() burns an index, as Java's."""
    builder = StreamsBuilder()
    first = builder.stream("topic")
    second = builder.stream("topic")
    second.to("out")
    assert first.name == second.name == "KSTREAM-SOURCE-0000000000"
    described = builder.build().describe()
    assert [n.name for n in described.subtopologies[0].nodes] == ["KSTREAM-SOURCE-0000000000", "KSTREAM-SINK-0000000002"]


def test_same_pattern_and_same_collection() -> None:
    """shouldAllowSubscribingToSamePattern, shouldAllowReadingFromSameCollectionOfTopics."""
    builder = StreamsBuilder()
    builder.stream(re.compile("some-regex"))
    builder.stream(re.compile("some-regex"))
    builder.stream(["topic1", "topic2"])
    builder.stream(["topic2", "topic1"])
    assert len(builder.build().describe().subtopologies) == 2


def test_overlapping_unequal_collections_refused() -> None:
    """shouldNotAllowReadingFromOverlappingAndUnequalCollectionOfTopics."""
    builder = StreamsBuilder()
    builder.stream(["topic"])
    with pytest.raises(TopologyError, match="overlapping but not equal"):
        builder.stream(["topic", "anotherTopic"])


@pytest.mark.parametrize(("first", "second"), [("earliest", "latest"), ("earliest", None), (None, "latest")])
def test_different_reset_policies_refused(first: str | None, second: str | None) -> None:
    """shouldThrowWhenSubscribedToATopicWith{Different,SetAndUnset,UnsetAndSet}ResetPolicies (and the pattern ones)."""
    for topic in ("topic", re.compile("some-regex")):
        builder = StreamsBuilder()

        def consumed(policy: str | None) -> Consumed[Any, Any]:
            return Consumed() if policy is None else Consumed().with_offset_reset_policy(policy)

        builder.stream(topic, consumed(first))
        with pytest.raises(TopologyError, match="reset policy"):
            builder.stream(topic, consumed(second))


def test_different_serdes_refused() -> None:
    """Java would read the second stream with the first's deserializers; we refuse instead (docs/dsl.md)."""
    builder = StreamsBuilder()
    builder.stream("topic", key_serde=S, value_serde=S)
    builder.stream("topic", key_serde=S)  # the same, or not given: merged
    with pytest.raises(TopologyError, match="value serde"):
        builder.stream("topic", value_serde=Serdes.Long())


def test_tables_and_streams_of_one_topic_refused() -> None:
    """shouldNotAllowTablesFromSameTopic, shouldNowAllowStreamAndTableFromSameTopic."""
    builder = StreamsBuilder()
    builder.table("topic")
    with pytest.raises(TopologyError, match="already consumed"):
        builder.table("topic")
    builder = StreamsBuilder()
    builder.stream("topic")
    with pytest.raises(TopologyError, match="already consumed"):
        builder.table("topic")


def _joined(two_streams: bool) -> list[tuple[str, str, int]]:
    builder = StreamsBuilder()
    stream1 = builder.stream("topic1", Consumed.with_(S, S))
    stream2 = builder.stream("topic1", Consumed.with_(S, S)) if two_streams else stream1
    stream1.join(stream2, lambda v, v2: v + v2, JoinWindows.of_time_difference_with_no_grace(100),
                 StreamJoined.with_(S, S, S)).to("out")  # fmt: skip
    with TopologyTestDriver(builder.build(), {"application.id": "self-join"}) as driver:
        source = driver.create_input_topic("topic1", S, S)
        for key, value, ts in [("A", "1", 1), ("B", "1", 2), ("A", "2", 3), ("B", "2", 4), ("B", "3", 5)]:
            source.pipe_input(key, value, ts)
        return [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, S).read_records_to_list()]


# what the inner join of a stream with a copy of itself gives: each record meets itself and every
# earlier record of its key within the window, once from each side
EXPECTED = [
    ("A", "11", 1), ("B", "11", 2), ("A", "21", 3), ("A", "12", 3), ("A", "22", 3),
    ("B", "21", 4), ("B", "12", 4), ("B", "22", 4),
    ("B", "31", 5), ("B", "32", 5), ("B", "13", 5), ("B", "23", 5), ("B", "33", 5),
]  # fmt: skip


@pytest.mark.parametrize("two_streams", [False, True], ids=["single-stream", "two-streams"])
def test_self_join(two_streams: bool) -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinWith{SingleStream,TwoStreams}: the
    self-join gives what the inner join of two streams of the topic gives."""
    assert _joined(two_streams) == EXPECTED
