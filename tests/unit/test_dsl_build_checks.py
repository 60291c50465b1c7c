"""What Kafka Streams refuses while building a DSL topology.

Translated from Kafka Streams' SuppressTopologyTest.shouldThrowOnSuppressFor{Materialized,
NonMaterialized}VersionedTable, StreamsBuilderTest.shouldThrowOnVersionedStoreSupplierForGlobalTable
and KStreamRepartitionTest.shouldThrowAnExceptionWhenNumberOfPartitionsOfRepartitionOperationsDoNotMatchWhenJoining
(apache/kafka streams/src/test/java/org/apache/kafka/streams/...), with their inputs and messages.
"""

from __future__ import annotations

import pytest

from streams_core import (
    BufferConfig,
    Consumed,
    JoinWindows,
    Materialized,
    Repartitioned,
    Serdes,
    Stores,
    StreamsBuilder,
    Suppressed,
    TopologyError,
    TopologyTestDriver,
)

INT, STR = Serdes.Integer(), Serdes.String()


def _versioned(name: str = "store") -> Materialized:
    return Materialized.as_(Stores.persistent_versioned_key_value_store(name, 0))


def test_suppress_of_materialized_versioned_table_refused() -> None:
    """shouldThrowOnSuppressForMaterializedVersionedTable: at once."""
    table = StreamsBuilder().table("input", _versioned())
    with pytest.raises(TopologyError, match="only supported for non-versioned KTables"):
        table.suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded()))


def test_suppress_of_table_inheriting_versions_refused_at_build() -> None:
    """shouldThrowOnSuppressForNonMaterializedVersionedTable: a filter without a store of its own is
    versioned through its parent; `build()` refuses the suppression."""
    builder = StreamsBuilder()
    builder.table("input", _versioned()).filter(lambda k, v: True).suppress(
        Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    with pytest.raises(TopologyError, match="version semantics might be inherited from upstream"):
        builder.build()


def test_suppress_after_a_non_versioned_store_allowed() -> None:
    """A filter materialised in an ordinary store ends the versioned chain (Java's `isOutputVersioned`)."""
    builder = StreamsBuilder()
    builder.table("input", _versioned()).filter(lambda k, v: True, materialized=Materialized.as_("plain")).suppress(
        Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    builder.build()


def test_versioned_store_supplier_for_global_table_refused() -> None:
    """shouldThrowOnVersionedStoreSupplierForGlobalTable."""
    with pytest.raises(TopologyError, match="GlobalTables cannot be versioned"):
        StreamsBuilder().global_table("topic", _versioned().with_key_serde(Serdes.Long()).with_value_serde(STR))


def _joined_repartitions(input_partitions: int, b_partitions: int) -> StreamsBuilder:
    builder = StreamsBuilder()
    topic_b = builder.stream("topic-b", Consumed.with_(INT, STR)).repartition(
        Repartitioned.as_("topic-b-scale-up").with_number_of_partitions(b_partitions))
    (builder.stream("input-topic", Consumed.with_(INT, STR))
     .repartition(Repartitioned.as_("input-topic-scale-up").with_number_of_partitions(input_partitions))
     .join(topic_b, lambda value1, value2: value2, JoinWindows.of_time_difference_with_no_grace(10_000))
     .to("topic-output"))  # fmt: skip
    return builder


def test_joined_repartitions_with_different_partition_counts_refused() -> None:
    """shouldThrowAnExceptionWhenNumberOfPartitionsOfRepartitionOperationsDoNotMatchWhenJoining: Java's
    message, from `build()`, so neither KafkaStreams nor the TopologyTestDriver gets the topology."""
    builder = _joined_repartitions(4, 2)
    with pytest.raises(TopologyError) as raised:
        builder.build()
    assert ("Following topics do not have the same number of partitions: "
            "[{input-topic-scale-up-repartition=4, topic-b-scale-up-repartition=2}]") in str(raised.value)  # fmt: skip


def test_joined_repartitions_with_equal_partition_counts_run() -> None:
    builder = _joined_repartitions(3, 3)
    with TopologyTestDriver(builder.build(), {"application.id": "repartitions"}) as driver:
        driver.create_input_topic("topic-b", INT, STR).pipe_input(1, "b", 1)
        driver.create_input_topic("input-topic", INT, STR).pipe_input(1, "a", 2)
        assert driver.create_output_topic("topic-output", INT, STR).read_key_values_to_list() == [(1, "b")]
