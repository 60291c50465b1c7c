"""`reduce(operator.add | max | min)` over Long values on Spark's own aggregation (native_combine.py),
against KafkaStreams on the same input."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import Grouped, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import ENGINES, long_be, read_table, run_asyncio_to_end, utf8

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "plan", "bootstrap.servers": "127.0.0.1:9"}


def by_letter(reducer: Callable[[Any, Any], Any], value_serde: Any = L) -> Callable[[str, str], Topology]:
    """Per first letter of the key (a repartition topic), the values reduced by `reducer`."""

    def build(source: str, output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(source, key_serde=S, value_serde=value_serde).filter(lambda key, value: not key.startswith("z"))
         .group_by(lambda key, value: key[0], Grouped.with_(S, value_serde)).reduce(reducer)
         .to_stream().to(output, key_serde=S, value_serde=value_serde))
        return builder.build()

    return build


def per_key(reducer: Callable[[Any, Any], Any]) -> Callable[[str, str], Topology]:
    """Per key of the source (no repartition topic), the values reduced by `reducer`."""

    def build(source: str, output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(source, key_serde=S, value_serde=L).group_by_key().reduce(reducer)
         .to_stream().to(output, key_serde=S, value_serde=L))
        return builder.build()

    return build


@pytest.mark.parametrize(("reducer", "combine"), [(operator.add, "sum"), (max, "max"), (min, "min")])
def test_a_built_in_reducer_over_longs_is_sparks_own_aggregation(reducer: Any, combine: str) -> None:
    (query,) = SparkRunner(by_letter(reducer)("in", "out"), CONFIG).plan().queries
    assert query.native is not None and (query.native.kind, query.native.combine) == ("spark-reduce", combine)
    how = dict(query.operators())
    (reduce,) = [name for name in how if "REDUCE" in name]
    assert how[reduce].startswith(f"native: the reducer (the built-in or a function recognised as it) as Spark's {combine}()")
    assert ".agg(sum|max|min)" in query.describe()


def _kind(topology: Topology, **options: Any) -> tuple[str, str]:
    (query,) = SparkRunner(topology, CONFIG, **options).plan().queries
    assert query.native is not None
    return query.native.kind, query.native.combine


def _add(x: int, y: int, /) -> int:
    """A sum written out: recognised whatever its names and docstring."""
    return y + x


def _shadowing(max: Callable[[int, int], int]) -> Callable[[int, int], int]:  # the point of the test
    return lambda a, b: max(a, b)


@pytest.mark.parametrize(("reducer", "combine"), [
    (lambda a, b: a + b, "sum"), (_add, "sum"), (lambda total, v: max(total, v), "max"),
    (lambda a, b: b if b < a else a, "min"), (lambda a, b: a if a >= b else b, "max"),
])  # fmt: skip
def test_a_function_equal_to_a_built_in_over_integers_is_sparks_own_aggregation(reducer: Any, combine: str) -> None:
    assert _kind(by_letter(reducer)("in", "out")) == ("spark-reduce", combine)
    assert _kind(by_letter(reducer)("in", "out"), associative_reducers=True) == ("spark-reduce", combine)


@pytest.mark.parametrize("reducer", [
    lambda a, b: a + b + 1, lambda a, b: a - b, lambda a, b=0: a + b, lambda a, b, *more: a + b,
    lambda a, b: a if a > 0 else b, _shadowing(min), functools.partial(operator.add),
    eval("lambda a, b: max(a, b)", {"max": min}),  # a module whose global max is not the built-in
])  # fmt: skip
def test_a_lookalike_that_is_not_a_built_in_stays_the_users_function(reducer: Any) -> None:
    """Not the same code, a closure (its `max` is min), defaults, `*args`, a partial: the user's function runs."""
    assert _kind(by_letter(reducer)("in", "out")) == ("ordered-fold", "")
    assert _kind(by_letter(reducer)("in", "out"), associative_reducers=True) == ("partial-reduce", "")


def test_a_sum_of_other_values_than_longs_stays_the_users_function() -> None:
    assert _kind(by_letter(operator.add, S)("in", "out"))[0] == "ordered-fold", "string concatenation"
    assert _kind(by_letter(lambda a, b: a + b, S)("in", "out"))[0] == "ordered-fold", "string concatenation"
    assert _kind(by_letter(lambda a, b: a + b, Serdes.Double())("in", "out"))[0] == "ordered-fold", "floating point"
    assert _kind(by_letter(lambda a, b: max(a, b), Serdes.Integer())("in", "out"))[0] == "ordered-fold", "32 bits"


VALUES = [("apple", 5), ("avocado", -7), ("banana", 3), ("zed", 100), ("blueberry", 9), ("apricot", 2**40),
          ("bean", -1), ("cherry", 0), ("almond", 11), ("cocoa", -2**33), ("berry", 4)]  # fmt: skip
MORE = [("acorn", 6), ("cashew", 8), ("date", -3), ("banana", 1)]


async def run_twice(build: Callable[[str, str], Topology], bootstrap: str, spark: Any, tmp_path: Path,
                    name: str) -> tuple[dict[str, int], dict[str, int]]:  # fmt: skip
    """Both engines on VALUES, then MORE (Spark: two runs from one checkpoint, 3 records per
    micro-batch); (Spark's table, KafkaStreams')."""
    suffix = unique_topic(name)
    source = f"values-{suffix}"
    outputs = {engine: f"{engine}-{suffix}" for engine in ENGINES}
    await create_topic(bootstrap, source, partitions=2)
    for topic in outputs.values():
        await create_topic(bootstrap, topic, partitions=2)

    def records(pairs: list[tuple[str, int]], first: int) -> list[Rec]:
        return [Rec(k.encode(), v.to_bytes(8, "big", signed=True), partition=(first + i) % 2) for i, (k, v) in enumerate(pairs)]

    runner = SparkRunner(build(source, outputs["spark"]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "3"})  # fmt: skip
    (query,) = runner.plan().queries
    assert query.native is not None and query.native.kind == "spark-reduce"
    await produce(bootstrap, source, records(VALUES, 0))
    runner.run("available_now", tmp_path / "checkpoints")
    assert len([p for p in runner.progress[0] if p["numInputRows"]]) >= 3, "several micro-batches"
    await produce(bootstrap, source, records(MORE, len(VALUES)))
    runner.run("available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build(source, outputs["asyncio"]), f"asyncio-{suffix}", bootstrap, tmp_path / "state")
    spark_table, asyncio_table = [await read_table(bootstrap, outputs[e], utf8, long_be) for e in ENGINES]
    return spark_table, asyncio_table


async def test_a_sum_through_a_replaced_repartition_topic_matches_kafka_streams(bootstrap_servers: str, spark: Any,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    """The lambda recognised as `operator.add`: Spark's sum against KafkaStreams calling the lambda."""
    spark_table, asyncio_table = await run_twice(by_letter(lambda a, b: a + b), bootstrap_servers, spark, tmp_path,
                                                 "combine-sum")  # fmt: skip
    expected: dict[str, int] = {}
    for key, value in VALUES + MORE:
        if not key.startswith("z"):
            expected[key[0]] = expected.get(key[0], 0) + value
    assert spark_table == asyncio_table == expected


async def test_max_per_source_key_matches_kafka_streams(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    spark_table, asyncio_table = await run_twice(per_key(max), bootstrap_servers, spark, tmp_path, "combine-max")
    expected: dict[str, int] = {}
    for key, value in VALUES + MORE:
        expected[key] = max(expected.get(key, value), value)
    assert spark_table == asyncio_table == expected
