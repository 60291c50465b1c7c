"""`reduce()` with partial reductions per Spark partition (`associative_reducers=True`), against
KafkaStreams on the same input; without the opt-in it reduces record by record (test_native_fold.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import Grouped, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import ENGINES, read_table, run_asyncio_to_end, utf8

S = Serdes.String()
CONFIG = {"application.id": "plan", "bootstrap.servers": "127.0.0.1:9"}


def summed(source: str, output: str) -> Topology:
    """Per word, the sum of its lengths as a string: an associative, commutative reducer."""
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(str.split)
     .map(lambda key, word: (word, str(len(word)))).group_by_key(Grouped.with_(S, S))
     .reduce(lambda a, b: str(int(a) + int(b))).to_stream().to(output, key_serde=S, value_serde=S))
    return builder.build()


def joined(source: str, output: str) -> Topology:
    """Per first letter, the words in arrival order: associative, not commutative."""
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(str.split)
     .group_by(lambda key, word: word[0], Grouped.with_(S, S))
     .reduce(lambda a, b: f"{a},{b}").to_stream().to(output, key_serde=S, value_serde=S))
    return builder.build()


def test_a_reduce_is_partial_only_when_the_user_vouches_for_its_reducer() -> None:
    (ordered,) = SparkRunner(summed("in", "out"), CONFIG).plan().queries
    assert ordered.native is not None and ordered.native.kind == "ordered-fold", "record by record (test_native_fold.py)"
    (query,) = SparkRunner(summed("in", "out"), CONFIG, associative_reducers=True).plan().queries
    assert query.native is not None and query.native.kind == "partial-reduce" and query.native.bypassed_topic is not None
    how = dict(query.operators())
    (reduce,) = [name for name in how if "REDUCE" in name]
    assert how[reduce].startswith("python: the reducer per Spark partition")
    assert "applyInPandasWithState (the reducer over stored value and partials)" in query.describe()


async def run_both(build: Any, bootstrap: str, spark: Any, tmp_path: Path, suffix: str, source: str,
                   partitions: int) -> tuple[dict[str, str], dict[str, str]]:  # fmt: skip
    outputs = {engine: f"{engine}-{suffix}" for engine in ENGINES}
    for topic in outputs.values():
        await create_topic(bootstrap, topic, partitions=partitions)
    runner = SparkRunner(build(source, outputs["spark"]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "3"}, associative_reducers=True)  # fmt: skip
    assert runner.plan().queries[0].native is not None
    runner.run("available_now", tmp_path / "checkpoints")
    assert len([p for p in runner.progress[0] if p["numInputRows"]]) >= 3, "several micro-batches"
    await run_asyncio_to_end(build(source, outputs["asyncio"]), f"asyncio-{suffix}", bootstrap, tmp_path / "state")
    spark_table, asyncio_table = [await read_table(bootstrap, outputs[e], utf8, utf8) for e in ENGINES]
    return spark_table, asyncio_table


async def test_a_commutative_reducer_over_two_partitions_gives_the_same_table(bootstrap_servers: str, spark: Any,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    suffix = unique_topic("native-reduce-sum")
    source = f"lines-{suffix}"
    await create_topic(bootstrap_servers, source, partitions=2)
    lines = ["a bb a", "ccc bb", "a dddd", "bb bb eeeee", "ccc a", "dddd a bb", "x"]
    await produce(bootstrap_servers, source, [Rec(f"k{i}".encode(), line.encode(), partition=i % 2)
                                              for i, line in enumerate(lines)])  # fmt: skip
    spark_table, asyncio_table = await run_both(summed, bootstrap_servers, spark, tmp_path, suffix, source, 2)
    expected: dict[str, int] = {}
    for word in " ".join(lines).split():
        expected[word] = expected.get(word, 0) + len(word)
    assert spark_table == asyncio_table == {w: str(n) for w, n in expected.items()}


async def test_an_order_sensitive_reducer_keeps_the_partitions_order(bootstrap_servers: str, spark: Any,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """One partition (one order on both engines), through the replaced repartition topic, over
    several micro-batches: the stored value, then the batch's words in offset order."""
    suffix = unique_topic("native-reduce-join")
    source = f"lines-{suffix}"
    await create_topic(bootstrap_servers, source, partitions=1)
    lines = ["apple avocado", "banana", "apricot blueberry", "cherry", "almond", "bean cocoa", "acorn"]
    await produce(bootstrap_servers, source, [Rec(f"k{i}".encode(), line.encode(), partition=0) for i, line in enumerate(lines)])
    spark_table, asyncio_table = await run_both(joined, bootstrap_servers, spark, tmp_path, suffix, source, 1)
    assert spark_table == asyncio_table == {
        "a": "apple,avocado,apricot,almond,acorn", "b": "banana,blueberry,bean", "c": "cherry,cocoa"}
