"""Generated names numbered as Kafka Streams numbers them where Java burns an index.

The expected texts and records are Kafka Streams' own, from the tests named in each docstring.
"""

from __future__ import annotations

import re

from streams_core import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    TopologyTestDriver,
)

S = Serdes.String()

KEY_CHANGED_TO_TABLE = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
    '      --> KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-MAP-0000000001 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000005\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000004\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000005\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])\n'
    '      --> KSTREAM-TOTABLE-0000000002\n'
    '    Processor: KSTREAM-TOTABLE-0000000002 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000007\n'
    '      <-- KSTREAM-SOURCE-0000000006\n'
    '    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000008\n'
    '      <-- KSTREAM-TOTABLE-0000000002\n'
    '    Sink: KSTREAM-SINK-0000000008 (topic: output)\n'
    '      <-- KTABLE-TOSTREAM-0000000007\n'
    '\n'
)


def test_to_table_of_a_key_changed_stream_numbers_its_repartition_after_the_store_name() -> None:
    """KStreamImplTest.shouldSupportKeyChangeKTableFromKStream: Java generates a store name for an
    unnamed Materialized before the repartition (and keeps no store), so the filter is 5, not 4."""
    builder = StreamsBuilder()
    (builder.stream("input", Consumed.with_(S, S))
        .map(lambda key, value: (ord(key[0]) - ord("A"), value))
        .to_table(materialized=Materialized.with_(Serdes.Integer(), None))
        .to_stream().to("output"))  # fmt: skip
    topology = builder.build()
    assert str(topology.describe()) == KEY_CHANGED_TO_TABLE
    with TopologyTestDriver(topology, {"application.id": "to-table"}) as driver:
        source = driver.create_input_topic("input", S, S)
        for key, value, timestamp in [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0),
                                      ("A", "05", 10), ("A", "06", 8)]:  # fmt: skip
            source.pipe_input(key, value, timestamp)
        assert driver.create_output_topic("output", Serdes.Integer(), S).read_records_to_list() == [
            TestRecord(0, "01", 5), TestRecord(1, "02", 100), TestRecord(2, "03", 0), TestRecord(3, "04", 0),
            TestRecord(0, "05", 10), TestRecord(0, "06", 8)]  # fmt: skip


def test_count_with_an_unnamed_materialized_burns_a_store_name() -> None:
    """KGroupedStreamImpl / TimeWindowedKStreamImpl / SessionWindowedKStreamImpl.count(Materialized):
    "we used to burn a topology name here": an unnamed Materialized takes one index more than none."""
    for window in (None, TimeWindows.of_size_with_no_grace(10), SessionWindows.with_inactivity_gap(10)):
        numbers = []
        for materialized in (None, Materialized.with_(S, Serdes.Long()), Materialized.as_("named")):
            builder = StreamsBuilder()
            grouped = builder.stream("in", Consumed.with_(S, S)).group_by_key()
            counter = grouped if window is None else grouped.windowed_by(window)
            counter.count(materialized).to_stream()
            numbers.append(int(re.findall(r"KTABLE-TOSTREAM-(\d{10})", str(builder.build().describe()))[0]))
        # source 0, [burnt 1], generated store, aggregate, to_stream; a named store takes no index
        assert numbers == [3, 4, 2], window
