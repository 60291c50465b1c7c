"""The example DSL applications, as functions the integration tests and app/ can reuse.

- `word_count_topology()`: the README's word count (store "word-count") plus per-minute counts
  (window store "windowed-word-count", kept a day so that closed windows stay queryable), input
  `TextLinesTopic`, output `WordsWithCountsTopic`.
- `enrichment_topology()`: orders re-keyed by customer, joined with the customers table
  (repartition + co-partitioned KStream-KTable join), optionally with a GlobalKTable of
  products; output `enriched-orders`.
"""

from __future__ import annotations

from streams_core import (
    KeyValue,
    Materialized,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TimeWindow,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Windowed,
)

S, L, J = Serdes.String(), Serdes.Long(), Serdes.Json()


def word_count_topology(window_ms: int = 60_000) -> Topology:
    """The README's word count, with a windowed count next to it."""
    builder = StreamsBuilder()
    words = (builder.stream("TextLinesTopic", key_serde=S, value_serde=S)
             .flat_map_values(lambda line: line.lower().split())
             .group_by(lambda key, word: word))  # fmt: skip
    counts = words.count(Materialized.as_("word-count"))
    counts.to_stream().to("WordsWithCountsTopic", value_serde=Serdes.Long())
    windowed = Materialized.as_("windowed-word-count").with_retention(24 * 3600 * 1000)
    words.windowed_by(TimeWindows.of_size_with_no_grace(window_ms)).count(windowed)
    return builder.build()


def enrichment_topology(with_global_products: bool = False) -> Topology:
    """Orders `{customer, product, amount}` keyed by order id, enriched with the customer (and product)."""
    builder = StreamsBuilder()
    customers = builder.table("customers", Materialized.as_("customers").with_value_serde(J), key_serde=S)
    orders = builder.stream("orders", key_serde=S, value_serde=J)
    enriched = (orders.select_key(lambda order_id, order: order["customer"])
                .join(customers, lambda order, customer: {**order, "customer_name": customer["name"]}))  # fmt: skip
    if with_global_products:
        products = builder.global_table("products", Materialized.as_("products"), key_serde=S, value_serde=J)
        enriched = enriched.left_join(
            products,
            lambda customer_id, order: order["product"],
            lambda order, product: {**order, "product_name": product["name"] if product else None},
        )
    enriched.to("enriched-orders", key_serde=S, value_serde=J)
    return builder.build()


def test_word_count() -> None:
    with TopologyTestDriver(word_count_topology(), {"application.id": "wordcount"}) as driver:
        lines = driver.create_input_topic("TextLinesTopic", S, S)
        lines.pipe_input(None, "Hello Kafka Streams", 1_000)
        lines.pipe_input(None, "hello world", 61_000)
        out = driver.create_output_topic("WordsWithCountsTopic", S, L)
        assert out.read_records_to_list() == [
            TestRecord("hello", 1, 1_000), TestRecord("kafka", 1, 1_000), TestRecord("streams", 1, 1_000),
            TestRecord("hello", 2, 61_000), TestRecord("world", 1, 61_000),
        ]  # fmt: skip
        store = driver.get_key_value_store("word-count")
        assert store.get("hello") == 2
        assert list(store.range("a", "m")) == [KeyValue("hello", 2), KeyValue("kafka", 1)]
        windowed = driver.get_window_store("windowed-word-count")
        assert list(windowed.fetch("hello", 0, 120_000)) == [KeyValue(0, 1), KeyValue(60_000, 1)]
        assert list(windowed.fetch("hello", "hello", 0, 120_000))[1] == KeyValue(
            Windowed("hello", TimeWindow(60_000, 120_000)), 1)  # fmt: skip
    assert word_count_topology().internal_topology_builder.node_groups().keys() == {0, 1, 2}


def test_enrichment_join() -> None:
    with TopologyTestDriver(enrichment_topology(with_global_products=True), {"application.id": "enrich"}) as driver:
        driver.create_input_topic("products", S, J).pipe_input("p1", {"name": "pen"})
        driver.create_input_topic("customers", S, J).pipe_input("c1", {"name": "Ann"}, 1)
        orders = driver.create_input_topic("orders", S, J)
        orders.pipe_input("o1", {"customer": "c1", "product": "p1", "amount": 3}, 2)
        orders.pipe_input("o2", {"customer": "c2", "product": "p1", "amount": 1}, 3)
        orders.pipe_input("o3", {"customer": "c1", "product": "p9", "amount": 5}, 4)
        assert driver.create_output_topic("enriched-orders", S, J).read_records_to_list() == [
            TestRecord("c1", {"customer": "c1", "product": "p1", "amount": 3, "customer_name": "Ann",
                              "product_name": "pen"}, 2),
            TestRecord("c1", {"customer": "c1", "product": "p9", "amount": 5, "customer_name": "Ann",
                              "product_name": None}, 4),
        ]  # fmt: skip
    itb = enrichment_topology().internal_topology_builder
    itb.set_application_id("enrich")
    assert itb.copartition_groups() == [frozenset({"enrich-KSTREAM-KEY-SELECT-0000000003-repartition", "customers"})]
