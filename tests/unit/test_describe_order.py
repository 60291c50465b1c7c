"""describe() lists a node's several predecessors and successors in Kafka Streams' order.

Java keeps them in a TreeSet ordered by sub-graph size then name, each size read when the link
is made while the nodes are linked in HashMap order, so equal final sizes need not print by
name. Every expected text is Kafka Streams' own, from the test named in each docstring.
"""

from __future__ import annotations

from streams_core import (
    Consumed,
    Grouped,
    JoinWindows,
    KGroupedStream,
    Materialized,
    Processor,
    Produced,
    Serdes,
    StreamJoined,
    StreamsBuilder,
)

S = Serdes.String()


def concat(left: str, right: str) -> str:
    return left + right


def aggregate_string(key: str, value: str, aggregate: str) -> str:
    return aggregate + value


def cogroup_inputs(builder: StreamsBuilder, first: str, *others: str) -> list[KGroupedStream]:
    """CogroupedKStreamImplTest's grouped streams: the first topic's key changed (`map`), the others not."""
    streams = [builder.stream(topic, Consumed.with_(S, S)) for topic in (first, *others)]  # sources first, as Java
    return [streams[0].map(lambda k, v: (v, k)).group_by_key()] + [stream.group_by_key() for stream in streams[1:]]


JOINED_TOPOLOGY = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-WINDOWED-0000000002\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [other-topic])\n'
    '      --> KSTREAM-WINDOWED-0000000003\n'
    '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n'
    '      --> KSTREAM-JOINTHIS-0000000004\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n'
    '      --> KSTREAM-JOINOTHER-0000000005\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n'
    '      --> KSTREAM-MERGE-0000000006\n'
    '      <-- KSTREAM-WINDOWED-0000000003\n'
    '    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n'
    '      --> KSTREAM-MERGE-0000000006\n'
    '      <-- KSTREAM-WINDOWED-0000000002\n'
    '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
    '      --> none\n'
    '      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005\n'
    '\n'
)

MERGE_OF_MERGES = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [input_topic])\n'
    '      --> KSTREAM-KEY-SELECT-0000000001\n'
    '    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n'
    '      --> KSTREAM-MAPVALUES-0000000002, KSTREAM-MAPVALUES-0000000003, KSTREAM-MAPVALUES-0000000004\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])\n'
    '      --> KSTREAM-MERGE-0000000005\n'
    '      <-- KSTREAM-KEY-SELECT-0000000001\n'
    '    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n'
    '      --> KSTREAM-MERGE-0000000005\n'
    '      <-- KSTREAM-KEY-SELECT-0000000001\n'
    '    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])\n'
    '      --> KSTREAM-MERGE-0000000006\n'
    '      <-- KSTREAM-KEY-SELECT-0000000001\n'
    '    Processor: KSTREAM-MERGE-0000000005 (stores: [])\n'
    '      --> KSTREAM-MERGE-0000000006\n'
    '      <-- KSTREAM-MAPVALUES-0000000002, KSTREAM-MAPVALUES-0000000003\n'
    '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000007\n'
    '      <-- KSTREAM-MERGE-0000000005, KSTREAM-MAPVALUES-0000000004\n'
    '    Sink: KSTREAM-SINK-0000000007 (topic: output_topic)\n'
    '      <-- KSTREAM-MERGE-0000000006\n'
    '\n'
)

USER_NAMED_REPARTITION_TOPICS = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000003\n'
    '    Processor: KSTREAM-MAP-0000000003 (stores: [])\n'
    '      --> second-join-left-repartition-filter, first-join-left-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: first-join-left-repartition-filter (stores: [])\n'
    '      --> first-join-left-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Processor: second-join-left-repartition-filter (stores: [])\n'
    '      --> second-join-left-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Sink: first-join-left-repartition-sink (topic: first-join-left-repartition)\n'
    '      <-- first-join-left-repartition-filter\n'
    '    Sink: second-join-left-repartition-sink (topic: second-join-left-repartition)\n'
    '      <-- second-join-left-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])\n'
    '      --> first-join-other-windowed\n'
    '    Source: first-join-left-repartition-source (topics: [first-join-left-repartition])\n'
    '      --> first-join-this-windowed\n'
    '    Processor: first-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> first-join-other-join\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: first-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> first-join-this-join\n'
    '      <-- first-join-left-repartition-source\n'
    '    Processor: first-join-other-join (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> first-join-merge\n'
    '      <-- first-join-other-windowed\n'
    '    Processor: first-join-this-join (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> first-join-merge\n'
    '      <-- first-join-this-windowed\n'
    '    Processor: first-join-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- first-join-this-join, first-join-other-join\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- first-join-merge\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])\n'
    '      --> second-join-other-windowed\n'
    '    Source: second-join-left-repartition-source (topics: [second-join-left-repartition])\n'
    '      --> second-join-this-windowed\n'
    '    Processor: second-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> second-join-other-join\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: second-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> second-join-this-join\n'
    '      <-- second-join-left-repartition-source\n'
    '    Processor: second-join-other-join (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> second-join-merge\n'
    '      <-- second-join-other-windowed\n'
    '    Processor: second-join-this-join (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> second-join-merge\n'
    '      <-- second-join-this-windowed\n'
    '    Processor: second-join-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- second-join-this-join, second-join-other-join\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: out-two)\n'
    '      <-- second-join-merge\n'
    '\n'
)

GROUPED_REUSED_IN_DIFFERENT_COGROUPS = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n'
    '      --> KSTREAM-MAP-0000000003\n'
    '    Processor: KSTREAM-MAP-0000000003 (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter, COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition)\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter\n'
    '    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition)\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000015\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000016\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000015 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000017\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-source\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000016 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000017\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: COGROUPKSTREAM-MERGE-0000000017 (stores: [])\n'
    '      --> none\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-0000000015, COGROUPKSTREAM-AGGREGATE-0000000016\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000008\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [three])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000009\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000010\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-source\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000009 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000010\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: COGROUPKSTREAM-MERGE-0000000010 (stores: [])\n'
    '      --> none\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-0000000008, COGROUPKSTREAM-AGGREGATE-0000000009\n'
    '\n'
)

GROUPED_REUSED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n'
    '      --> KSTREAM-MAP-0000000002\n'
    '    Processor: KSTREAM-MAP-0000000002 (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter, KSTREAM-FILTER-0000000013\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000002\n'
    '    Processor: KSTREAM-FILTER-0000000013 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- KSTREAM-MAP-0000000002\n'
    '    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000013\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000007\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000008\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000009\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n'
    '      --> none\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: KSTREAM-SOURCE-0000000014 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition])\n'
    '      --> KSTREAM-AGGREGATE-0000000011\n'
    '    Processor: KSTREAM-AGGREGATE-0000000011 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000010])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000014\n'
    '\n'
)

GROUPED_REUSED_IN_SAME_COGROUPS = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n'
    '      --> KSTREAM-MAP-0000000002\n'
    '    Processor: KSTREAM-MAP-0000000002 (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter, COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000002\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter (stores: [])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000002\n'
    '    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n'
    '    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition)\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000008, COGROUPKSTREAM-AGGREGATE-0000000015\n'
    '    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000007\n'
    '    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition])\n'
    '      --> COGROUPKSTREAM-AGGREGATE-0000000014\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000009\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000014 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000016\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-source\n'
    '    Processor: COGROUPKSTREAM-AGGREGATE-0000000015 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010])\n'
    '      --> COGROUPKSTREAM-MERGE-0000000016\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000019\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n'
    '    Processor: COGROUPKSTREAM-MERGE-0000000016 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000017\n'
    '      <-- COGROUPKSTREAM-AGGREGATE-0000000014, COGROUPKSTREAM-AGGREGATE-0000000015\n'
    '    Processor: KTABLE-TOSTREAM-0000000017 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000018\n'
    '      <-- COGROUPKSTREAM-MERGE-0000000016\n'
    '    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000020\n'
    '      <-- COGROUPKSTREAM-MERGE-0000000009\n'
    '    Sink: KSTREAM-SINK-0000000018 (topic: output)\n'
    '      <-- KTABLE-TOSTREAM-0000000017\n'
    '    Sink: KSTREAM-SINK-0000000020 (topic: OUTPUT2)\n'
    '      <-- KTABLE-TOSTREAM-0000000019\n'
    '\n'
)

NAMED_REPARTITION_TOPICS_UNOPTIMIZED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
    '      --> KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-MAP-0000000001 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000029, KSTREAM-FILTER-0000000002, KSTREAM-FILTER-0000000020, aggregate-stream-repartition-filter, count-stream-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000020 (stores: [])\n'
    '      --> KSTREAM-PEEK-0000000021\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n'
    '      --> KSTREAM-MAPVALUES-0000000003\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-FILTER-0000000029 (stores: [])\n'
    '      --> joined-stream-left-repartition-filter\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-PEEK-0000000021 (stores: [])\n'
    '      --> reduced-stream-repartition-filter\n'
    '      <-- KSTREAM-FILTER-0000000020\n'
    '    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n'
    '      --> KSTREAM-PROCESSOR-0000000004\n'
    '      <-- KSTREAM-FILTER-0000000002\n'
    '    Processor: aggregate-stream-repartition-filter (stores: [])\n'
    '      --> aggregate-stream-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: count-stream-repartition-filter (stores: [])\n'
    '      --> count-stream-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: joined-stream-left-repartition-filter (stores: [])\n'
    '      --> joined-stream-left-repartition-sink\n'
    '      <-- KSTREAM-FILTER-0000000029\n'
    '    Processor: reduced-stream-repartition-filter (stores: [])\n'
    '      --> reduced-stream-repartition-sink\n'
    '      <-- KSTREAM-PEEK-0000000021\n'
    '    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [])\n'
    '      --> none\n'
    '      <-- KSTREAM-MAPVALUES-0000000003\n'
    '    Sink: aggregate-stream-repartition-sink (topic: aggregate-stream-repartition)\n'
    '      <-- aggregate-stream-repartition-filter\n'
    '    Sink: count-stream-repartition-sink (topic: count-stream-repartition)\n'
    '      <-- count-stream-repartition-filter\n'
    '    Sink: joined-stream-left-repartition-sink (topic: joined-stream-left-repartition)\n'
    '      <-- joined-stream-left-repartition-filter\n'
    '    Sink: reduced-stream-repartition-sink (topic: reduced-stream-repartition)\n'
    '      <-- reduced-stream-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: count-stream-repartition-source (topics: [count-stream-repartition])\n'
    '      --> KSTREAM-AGGREGATE-0000000007\n'
    '    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n'
    '      --> KTABLE-TOSTREAM-0000000011\n'
    '      <-- count-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012, joined-stream-other-windowed\n'
    '      <-- KSTREAM-AGGREGATE-0000000007\n'
    '    Source: joined-stream-left-repartition-source (topics: [joined-stream-left-repartition])\n'
    '      --> joined-stream-this-windowed\n'
    '    Processor: joined-stream-other-windowed (stores: [joined-stream-other-join-store])\n'
    '      --> joined-stream-other-join\n'
    '      <-- KTABLE-TOSTREAM-0000000011\n'
    '    Processor: joined-stream-this-windowed (stores: [joined-stream-this-join-store])\n'
    '      --> joined-stream-this-join\n'
    '      <-- joined-stream-left-repartition-source\n'
    '    Processor: joined-stream-other-join (stores: [joined-stream-this-join-store])\n'
    '      --> joined-stream-merge\n'
    '      <-- joined-stream-other-windowed\n'
    '    Processor: joined-stream-this-join (stores: [joined-stream-other-join-store])\n'
    '      --> joined-stream-merge\n'
    '      <-- joined-stream-this-windowed\n'
    '    Processor: joined-stream-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000038\n'
    '      <-- joined-stream-this-join, joined-stream-other-join\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: outputTopic_0)\n'
    '      <-- KTABLE-TOSTREAM-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000038 (topic: outputTopicForJoin)\n'
    '      <-- joined-stream-merge\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: aggregate-stream-repartition-source (topics: [aggregate-stream-repartition])\n'
    '      --> KSTREAM-AGGREGATE-0000000014\n'
    '    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000013])\n'
    '      --> KTABLE-TOSTREAM-0000000018\n'
    '      <-- aggregate-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000019\n'
    '      <-- KSTREAM-AGGREGATE-0000000014\n'
    '    Sink: KSTREAM-SINK-0000000019 (topic: outputTopic_1)\n'
    '      <-- KTABLE-TOSTREAM-0000000018\n'
    '\n'
    '  Sub-topology: 3\n'
    '    Source: reduced-stream-repartition-source (topics: [reduced-stream-repartition])\n'
    '      --> KSTREAM-REDUCE-0000000023\n'
    '    Processor: KSTREAM-REDUCE-0000000023 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000022])\n'
    '      --> KTABLE-TOSTREAM-0000000027\n'
    '      <-- reduced-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000028\n'
    '      <-- KSTREAM-REDUCE-0000000023\n'
    '    Sink: KSTREAM-SINK-0000000028 (topic: outputTopic_2)\n'
    '      <-- KTABLE-TOSTREAM-0000000027\n'
    '\n'
)

FK_JOIN_OF_TABLES_FROM_STREAMS = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [input1])\n'
    '      --> KSTREAM-TOTABLE-0000000001\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
    '      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n'
    '      <-- KTABLE-SOURCE-0000000016\n'
    '    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000020\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n'
    '      --> KTABLE-SINK-0000000008\n'
    '      <-- KSTREAM-TOTABLE-0000000001\n'
    '    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: output)\n'
    '      <-- KTABLE-TOSTREAM-0000000020\n'
    '    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000003 (topics: [input2])\n'
    '      --> KSTREAM-TOTABLE-0000000004\n'
    '    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
    '    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
    '      <-- KSTREAM-SOURCE-0000000003\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n'
    '      <-- KTABLE-SOURCE-0000000009\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
    '      --> KTABLE-SINK-0000000015\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
    '      --> KTABLE-SINK-0000000015\n'
    '      <-- KSTREAM-TOTABLE-0000000004\n'
    '    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
    '\n'
)

JOIN_OF_TABLES_FROM_STREAMS = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n'
    '      --> KSTREAM-TOTABLE-0000000001\n'
    '    Source: KSTREAM-SOURCE-0000000003 (topics: [right])\n'
    '      --> KSTREAM-TOTABLE-0000000004\n'
    '    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
    '      --> KTABLE-JOINTHIS-0000000007\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
    '      --> KTABLE-JOINOTHER-0000000008\n'
    '      <-- KSTREAM-SOURCE-0000000003\n'
    '    Processor: KTABLE-JOINOTHER-0000000008 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
    '      --> KTABLE-MERGE-0000000006\n'
    '      <-- KSTREAM-TOTABLE-0000000004\n'
    '    Processor: KTABLE-JOINTHIS-0000000007 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
    '      --> KTABLE-MERGE-0000000006\n'
    '      <-- KSTREAM-TOTABLE-0000000001\n'
    '    Processor: KTABLE-MERGE-0000000006 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000009\n'
    '      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n'
    '    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000010\n'
    '      <-- KTABLE-MERGE-0000000006\n'
    '    Sink: KSTREAM-SINK-0000000010 (topic: output)\n'
    '      <-- KTABLE-TOSTREAM-0000000009\n'
    '\n'
)


def test_a_merge_after_a_stream_stream_join_lists_jointhis_first() -> None:
    """StreamsGraphTest.shouldBeAbleToBuildTopologyIncrementally (its first step)."""
    builder = StreamsBuilder()
    stream = builder.stream("topic", Consumed.with_(S, S))
    other = builder.stream("other-topic", Consumed.with_(S, S))
    stream.join(other, concat, JoinWindows.of_time_difference_with_no_grace(5000))
    assert str(builder.build().describe()) == JOINED_TOPOLOGY


def test_user_named_repartition_topics_list_the_later_filter_first() -> None:
    """KStreamKStreamJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName."""
    builder = StreamsBuilder()
    stream1 = builder.stream("topic", Consumed.with_(S, S))
    stream2 = builder.stream("topic2", Consumed.with_(S, S))
    stream3 = builder.stream("topic3", Consumed.with_(S, S))
    new_stream = stream1.map(lambda k, v: (v, k))
    joined = StreamJoined.with_(S, S, S)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    new_stream.join(stream2, concat, window, joined.with_name("first-join")).to("out-one")
    new_stream.join(stream3, concat, window, joined.with_name("second-join")).to("out-two")
    assert str(builder.build().describe()) == USER_NAMED_REPARTITION_TOPICS


def test_merges_of_merges_list_the_merge_before_the_mapped_stream() -> None:
    """StreamsGraphTest.shouldOptimizeSeveralMergeNodesWithCommonKeyChangingParent (optimization
    only removes repartitioning, which `to()` does not add)."""
    builder = StreamsBuilder()
    ints = Serdes.Integer()
    parent = builder.stream("input_topic", Consumed.with_(ints, ints)).select_key(lambda k, v: k + v)
    child1 = parent.map_values(lambda v: v + 1)
    child2 = parent.map_values(lambda v: v + 2)
    child3 = parent.map_values(lambda v: v + 3)
    child1.merge(child2).merge(child3).to("output_topic")
    assert str(builder.build().describe()) == MERGE_OF_MERGES


def test_a_grouped_stream_reused_in_two_cogroups() -> None:
    """CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInDifferentCogroups."""
    builder = StreamsBuilder()
    grouped_one, grouped_two, grouped_three = cogroup_inputs(builder, "one", "two", "three")
    grouped_one.cogroup(aggregate_string).cogroup(grouped_three, aggregate_string).aggregate(lambda: "")
    grouped_one.cogroup(aggregate_string).cogroup(grouped_two, aggregate_string).aggregate(lambda: "")
    assert str(builder.build().describe()) == GROUPED_REUSED_IN_DIFFERENT_COGROUPS


def test_a_grouped_stream_reused_in_two_same_cogroups_lists_the_later_filter_first() -> None:
    """CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInSameCogroups."""
    builder = StreamsBuilder()
    grouped_one, grouped_two = cogroup_inputs(builder, "one", "two")
    cogrouped_two = grouped_one.cogroup(aggregate_string).cogroup(grouped_two, aggregate_string).aggregate(lambda: "")
    cogrouped_one = grouped_one.cogroup(aggregate_string).cogroup(grouped_two, aggregate_string).aggregate(lambda: "")
    cogrouped_one.to_stream().to("output")
    cogrouped_two.to_stream().to("OUTPUT2")
    assert str(builder.build().describe()) == GROUPED_REUSED_IN_SAME_COGROUPS


def test_a_grouped_stream_reused_by_a_cogroup_and_an_aggregation() -> None:
    """CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReused."""
    builder = StreamsBuilder()
    grouped_one, grouped_two = cogroup_inputs(builder, "one", "two")
    grouped_one.cogroup(aggregate_string).cogroup(grouped_two, aggregate_string).aggregate(lambda: "")
    grouped_one.aggregate(lambda: "", aggregate_string)
    assert str(builder.build().describe()) == GROUPED_REUSED


def test_a_foreign_key_join_of_tables_from_streams() -> None:
    """KStreamImplTest.shouldSupportForeignKeyTableTableJoinWithKTableFromKStream."""
    builder = StreamsBuilder()
    left = builder.stream("input1", Consumed.with_(S, S)).to_table()
    right = builder.stream("input2", Consumed.with_(S, S)).to_table()
    left.join(right, lambda value: value.split("|")[1], lambda v1, v2: f"({v1},{v2})").to_stream().to("output")
    assert str(builder.build().describe()) == FK_JOIN_OF_TABLES_FROM_STREAMS


def test_a_join_of_tables_from_streams_lists_jointhis_first() -> None:
    """KStreamImplTest.shouldSupportTableTableJoinWithKStreamToKTable."""
    builder = StreamsBuilder()
    table1 = builder.stream("left", Consumed.with_(S, S)).to_table()
    table2 = builder.stream("right", Consumed.with_(S, S)).to_table()
    table1.join(table2, concat).to_stream().to("output")
    assert str(builder.build().describe()) == JOIN_OF_TABLES_FROM_STREAMS


class Collect(Processor):
    def process(self, record: object) -> None:
        pass


def named_repartition_topics(builder: StreamsBuilder) -> None:
    """RepartitionTopicNamingTest.buildTopology: one key-changed stream grouped, aggregated and joined under names."""
    ints, longs = Serdes.Integer(), Serdes.Long()
    mapped = builder.stream("input", Consumed.with_(S, S)).map(lambda k, v: (k.upper(), v))
    mapped.filter(lambda k, v: k == "B").map_values(lambda v: v.upper()).process(Collect)
    counts = mapped.group_by_key(Grouped.as_("count-stream")).count(Materialized.with_(S, longs)).to_stream()
    counts.to("outputTopic_0", Produced.with_(S, longs))
    (mapped.group_by_key(Grouped.as_("aggregate-stream"))
        .aggregate(lambda: 0, lambda k, v, total: total + len(v), Materialized.with_(S, ints))
        .to_stream().to("outputTopic_1", Produced.with_(S, ints)))  # fmt: skip
    (mapped.filter(lambda k, v: True).peek(lambda k, v: None).group_by_key(Grouped.as_("reduced-stream"))
        .reduce(lambda a, b: a + ":" + b, Materialized.with_(S, S))
        .to_stream().to("outputTopic_2", Produced.with_(S, S)))  # fmt: skip
    joined = StreamJoined.with_(S, S, longs).with_store_name("joined-stream").with_name("joined-stream")
    (mapped.filter(lambda k, v: k == "A")
        .join(counts, lambda v1, v2: f"{v1}:{v2}", JoinWindows.of_time_difference_with_no_grace(5000), joined)
        .to("outputTopicForJoin"))  # fmt: skip


def test_named_repartition_topics_of_one_key_changed_stream() -> None:
    """RepartitionTopicNamingTest.shouldReuseFirstRepartitionTopicNameWhenOptimizing, its
    EXPECTED_UNOPTIMIZED_TOPOLOGY: five successors of one node in Java's order, and the index
    `count(Materialized)` burns for an unnamed store (KGroupedStreamImpl.count)."""
    builder = StreamsBuilder()
    named_repartition_topics(builder)
    assert str(builder.build().describe()) == NAMED_REPARTITION_TOPICS_UNOPTIMIZED

