"""KStream.process_values (KIP-820) and stores brought by a supplier's `stores()` (ConnectedStoreProvider).

Translated from Kafka Streams' KStreamNewProcessorApiTest and KStreamImplTest.shouldProcessValues
(apache/kafka streams/src/test/java/org/apache/kafka/streams/kstream/internals/), with their
inputs and expected outputs.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    ContextualFixedKeyProcessor,
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyRecord,
    Named,
    Processor,
    ProcessorContext,
    Produced,
    Record,
    Serdes,
    Stores,
    StreamsBuilder,
    TestRecord,
    Topology,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.String()
CONFIG = {"application.id": "process-values"}


class _Updater(ContextualFixedKeyProcessor[str, str, str]):
    """KStreamNewProcessorApiTest's processor: puts `value + "Updated"` if absent and forwards it."""

    def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
        super().init(context)
        self.store = context.get_state_store("store")
        assert self.store is not None

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        self.store.put_if_absent(record.key, record.value + "Updated")
        self.context().forward(record.with_value(record.value + "Updated"))


class _UpdaterSupplier:
    """A FixedKeyProcessorSupplier that is also a ConnectedStoreProvider (or not, `store_builder` None)."""

    def __init__(self, store_builder: Any) -> None:
        self.store_builder = store_builder

    def get(self) -> _Updater:
        return _Updater()

    def stores(self) -> set[Any] | None:
        return None if self.store_builder is None else {self.store_builder}


@pytest.mark.parametrize("add_store_directly", [False, True], ids=["connected-store-provider", "add-state-store"])
def test_state_store_attached(add_store_directly: bool) -> None:
    """KStreamNewProcessorApiTest.shouldGetStateStoreWithConnectedStoreProvider / ...WithStreamBuilder."""
    builder = StreamsBuilder()
    store_builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("store"), S, S)
    if add_store_directly:
        builder.add_state_store(store_builder)
    (builder.stream("input", key_serde=S, value_serde=S)
     .process_values(_UpdaterSupplier(None if add_store_directly else store_builder), "store")
     .to("output", key_serde=S, value_serde=S))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("input", S, S)
        for key, value in [("a", "foo"), ("b", "bar"), ("c", "baz")]:
            source.pipe_input(key, value)
        assert driver.create_output_topic("output", S, S).read_values_to_list() == [
            "fooUpdated", "barUpdated", "bazUpdated",
        ]  # fmt: skip
        store = driver.get_key_value_store("store")
        assert (store.get("a"), store.get("b"), store.get("c")) == ("fooUpdated", "barUpdated", "bazUpdated")


def _lengths() -> ContextualFixedKeyProcessor[str, str, int]:
    class Length(ContextualFixedKeyProcessor[str, str, int]):
        def process(self, record: FixedKeyRecord[str, str]) -> None:
            self.context().forward(record.with_value(len(record.value)))

    return Length()


def test_process_values_describe_and_output() -> None:
    """KStreamImplTest.shouldProcessValues: the description and the records (timestamps kept)."""
    builder = StreamsBuilder()
    (builder.stream("input", key_serde=S, value_serde=S)
     .process_values(_lengths, named=Named.as_("fkp"))
     .to("output", Produced.with_(None, Serdes.Integer())))  # fmt: skip
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> fkp\n"
        "    Processor: fkp (stores: [])\n"
        "      --> KSTREAM-SINK-0000000001\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000001 (topic: output)\n"
        "      <-- fkp\n\n"
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("input", S, S)
        for key, value, ts in [("A", "0", 5), ("B", "00", 100), ("C", "000", 0), ("D", "0000", 0),
                               ("A", "00000", 10), ("A", "000000", 8)]:  # fmt: skip
            source.pipe_input(key, value, ts)
        assert driver.create_output_topic("output", S, Serdes.Integer()).read_records_to_list() == [
            TestRecord("A", 1, 5), TestRecord("B", 2, 100), TestRecord("C", 3, 0), TestRecord("D", 4, 0),
            TestRecord("A", 5, 10), TestRecord("A", 6, 8),
        ]  # fmt: skip


def test_generated_name_and_no_repartition_before_grouping() -> None:
    """The generated name is Java's `KSTREAM-PROCESSVALUES-`; the key is fixed, so a grouping after it
    needs no repartition topic (unlike `process`)."""
    builder = StreamsBuilder()
    builder.stream("input", key_serde=S, value_serde=S).process_values(_lengths).group_by_key().count()
    described = builder.build().describe()
    assert [n.name for n in described.subtopologies[0].nodes][:2] == [
        "KSTREAM-SOURCE-0000000000", "KSTREAM-PROCESSVALUES-0000000001",
    ]  # fmt: skip
    assert len(described.subtopologies) == 1
    processed = StreamsBuilder()
    processed.stream("input", key_serde=S, value_serde=S).process(_Passer).group_by_key().count()
    assert len(processed.build().describe().subtopologies) == 2


class _Passer(Processor[str, str, str, str]):
    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record)


def test_forwarding_a_plain_record_is_refused() -> None:
    """Java's FixedKeyProcessorContext.forward takes FixedKeyRecords only (a compile-time check there)."""

    class Rekeying(FixedKeyProcessor[str, str, str]):
        def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: FixedKeyRecord[str, str]) -> None:
            self.context.forward(Record("other", record.value, record.timestamp))  # type: ignore[arg-type]

    builder = StreamsBuilder()
    builder.stream("input", key_serde=S, value_serde=S).process_values(Rekeying).to("output")
    with TopologyTestDriver(builder.build(), CONFIG) as driver, pytest.raises(Exception, match="FixedKeyRecord"):
        driver.create_input_topic("input", S, S).pipe_input("a", "x")


def test_supplier_returning_the_same_processor_is_refused() -> None:
    """Java's ApiUtils.checkSupplier: every task needs its own processor."""
    shared = _lengths()
    builder = StreamsBuilder()
    builder.stream("input", key_serde=S, value_serde=S).process_values(lambda: shared).to("output")
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG):
        pass
    with pytest.raises(TopologyError, match="same instance"), TopologyTestDriver(topology, CONFIG):
        pass


class _Counter(Processor[str, str, str, int]):
    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context, self.store = context, context.get_state_store("counts")

    def process(self, record: Record[str, str]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


class _CounterSupplier:
    def __init__(self, store_builder: Any) -> None:
        self.store_builder = store_builder

    def get(self) -> _Counter:
        return _Counter()

    def stores(self) -> list[Any]:
        return [self.store_builder]


def test_process_and_add_processor_connect_supplier_stores() -> None:
    """ConnectedStoreProvider for `process` and `Topology.add_processor` (Java's TopologyTest
    shouldConnectProcessorAndStoresFromSupplier-style): the stores are added and connected; one
    builder shared by two suppliers is added once; two builders of one name are refused."""
    store_builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, Serdes.Long())
    builder = StreamsBuilder()
    builder.stream("input", key_serde=S, value_serde=S).process(_CounterSupplier(store_builder)).to(
        "output", value_serde=Serdes.Long())
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("input", S, S)
        for key in "aba":
            source.pipe_input(key, "x")
        assert driver.create_output_topic("output", S, Serdes.Long()).read_key_values_to_list() == [
            ("a", 1), ("b", 1), ("a", 2),
        ]  # fmt: skip

    topology = (Topology().add_source("src", "input", key_serde=S, value_serde=S)
                .add_processor("p1", _CounterSupplier(store_builder), "src")
                .add_processor("p2", _CounterSupplier(store_builder), "src"))  # fmt: skip
    assert str(topology.describe()).count("(stores: [counts])") == 2
    other = Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, Serdes.Long())
    with pytest.raises(TopologyError, match="different state store named 'counts'"):
        topology.add_processor("p3", _CounterSupplier(other), "src")


def test_named_process_burns_no_index() -> None:
    """Java's `process(supplier, Named)` and `processValues(supplier, Named)` take the name as given
    (`NamedInternal.name()`, no index generated): the sink after them is `KSTREAM-SINK-0000000001`."""
    for operator in ("process", "process_values"):
        builder = StreamsBuilder()
        stream = builder.stream("input", key_serde=S, value_serde=S)
        supplier = _Passer if operator == "process" else _lengths
        getattr(stream, operator)(supplier, named="p").to("output")
        nodes = [n.name for n in builder.build().describe().subtopologies[0].nodes]
        assert nodes == ["KSTREAM-SOURCE-0000000000", "p", "KSTREAM-SINK-0000000001"], operator
