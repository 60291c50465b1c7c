"""`reduce()` and `aggregate()` with user functions in the vectorized stage (native_reduce.py): each
key's values in Kafka Streams' order through the user's function, one output per key and
micro-batch, state as the store serde's bytes; against KafkaStreams on the same input and against
a reference of the documented order over Spark's own micro-batches."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streams_core import Grouped, Materialized, Produced, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from streams_core.spark.native_reduce import kafka_order_of
from streams_core.spark.subtopology_executor import InputRow, kafka_order
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, run_asyncio_to_end, utf8

S = Serdes.String()
CONFIG = {"application.id": "plan", "bootstrap.servers": "127.0.0.1:9"}
#: (partition, offset, line, timestamp) of a source record.
Line = tuple[int, int, str, int]


def nested(source: str, output: str) -> Topology:
    """Per first letter, the words nested as the reduction goes (not associative: the brackets show the
    order of application); a word ending in "!" deletes the key, the next word starts it again."""
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(str.split)
     .group_by(lambda key, word: word[0], Grouped.with_(S, S))
     .reduce(lambda a, b: None if b.endswith("!") else f"({a} {b})").to_stream().to(output, key_serde=S, value_serde=S))
    return builder.build()


def _nested_step(key: str, aggregate: str | None, word: str) -> str | None:
    return word if aggregate is None else None if word.endswith("!") else f"({aggregate} {word})"


def tallies(source: str, output: str) -> Topology:
    """Per first letter, a JSON count, letter sum and the words in order (the key passed in too)."""
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(str.split)
     .group_by(lambda key, word: word[0], Grouped.with_(S, S))
     .aggregate(lambda: {"count": 0, "letters": 0, "words": []},
                lambda key, word, agg: {"key": key, "count": agg["count"] + 1, "letters": agg["letters"] + len(word),
                                        "words": [*agg["words"], word]},
                Materialized.with_(S, Serdes.Json()))
     .to_stream().to(output, Produced.with_(S, Serdes.Json())))  # fmt: skip
    return builder.build()


def _tally_step(key: str, aggregate: dict[str, Any] | None, word: str) -> dict[str, Any]:
    agg = aggregate or {"count": 0, "letters": 0, "words": []}
    return {"key": key, "count": agg["count"] + 1, "letters": agg["letters"] + len(word), "words": [*agg["words"], word]}


def test_reduce_and_aggregate_compile_to_the_vectorized_stage() -> None:
    for build in (nested, tallies):
        (query,) = SparkRunner(build("in", "out"), CONFIG).plan().queries
        assert query.stage == "native" and query.native is not None and query.native.kind == "ordered-fold"
        assert query.native.bypassed_topic is not None and query.native.string_values
        (fold,) = [how for name, how in query.operators() if "REDUCE-0" in name or "AGGREGATE-0" in name]
        assert fold.startswith("vectorized: the user's function") and "applyInPandasWithState" in fold
    uncached = SparkRunner(nested("in", "out"), {**CONFIG, "statestore.cache.max.bytes": 0}).plan()
    assert [q.stage for q in uncached.queries] == ["stateless", "keyed"], "caching off: every update, keyed stage"


def test_the_vectorized_order_is_kafka_streams_partition_group_order() -> None:
    """`kafka_order_of` (numpy, the stage's) takes rows as `kafka_order` (the keyed and task stages')
    does, on random partitions, offsets in any order, and repeated timestamps (ties: the lower partition)."""
    rng = random.Random(23)
    for _ in range(2_000):
        rows = [InputRow("t", partition, offset, BASE_TS + rng.randint(0, 6), None, None, ())
                for partition in rng.sample(range(6), rng.randint(1, 4)) for offset in rng.sample(range(20), rng.randint(0, 6))]
        rng.shuffle(rows)
        column = [np.array([getattr(r, f) for r in rows], np.int64) for f in ("partition", "offset", "timestamp")]
        # kafka_order breaks a tie for the partition it saw first: here the lower one, as the stage does
        assert [rows[i] for i in kafka_order_of(*column)] == kafka_order(sorted(rows, key=lambda r: r.partition))


def _batches(progress: list[dict[str, Any]], topic: str) -> list[dict[int, tuple[int, int]]]:
    """Per micro-batch that read records: partition -> (start offset, end offset)."""
    out = []
    for report in progress:
        if not report["numInputRows"]:
            continue
        (source,) = report["sources"]
        start, end = (json.loads(o) if isinstance(o, str) else o for o in (source["startOffset"], source["endOffset"]))
        begin = start[topic] if start else {}
        out.append({int(p): (int(begin.get(p, 0)), int(e)) for p, e in end[topic].items()})
    return out


def _in_documented_order(records: list[tuple[int, int, str, int]]) -> list[str]:
    """A key's (partition, offset, word, timestamp) of one micro-batch as the stage takes them: offset
    order per partition; across partitions the head with the lowest timestamp, then lower partition."""
    queues = {p: sorted((r for r in records if r[0] == p), key=lambda r: r[1]) for p in sorted({r[0] for r in records})}
    taken = []
    while any(queues.values()):
        head = min((q[0][3], p) for p, q in queues.items() if q)[1]
        taken.append(queues[head].pop(0)[2])
    return taken


def expected_outputs(lines: list[Line], batches: list[dict[int, tuple[int, int]]],
                     step: Callable[[str, Any, str], Any]) -> tuple[Counter[tuple[str, str | None]], dict[str, Any]]:  # fmt: skip
    """The records one output per key and micro-batch gives (key, JSON of the value or None), and the
    final table, folding each micro-batch's words per key in the documented order."""
    table: dict[str, Any] = {}
    records: Counter[tuple[str, str | None]] = Counter()
    for batch in batches:
        words: dict[str, list[tuple[int, int, str, int]]] = {}
        for partition, offset, line, timestamp in lines:
            start, end = batch.get(partition, (0, 0))
            if start <= offset < end:
                for word in line.split():
                    words.setdefault(word[0], []).append((partition, offset, word, timestamp))
        for key, taken in words.items():
            before = table.get(key)
            aggregate = before
            for word in _in_documented_order(taken):
                aggregate = step(key, aggregate, word)
            if aggregate is not None:
                table[key] = aggregate
                records[key, json.dumps(aggregate, sort_keys=True)] += 1
            elif before is not None:
                del table[key]
                records[key, None] += 1
    return records, table


async def _output_records(bootstrap: str, topic: str, decode: Callable[[bytes], Any]) -> Counter[tuple[str, str | None]]:
    return Counter((r.key.decode(), None if r.value is None else json.dumps(decode(r.value), sort_keys=True))
                   for r in await read_all(bootstrap, topic) if r.key is not None)  # fmt: skip


async def test_a_non_associative_reduce_with_deletes_matches_kafka_streams_across_runs(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Through the replaced repartition topic, two source partitions (each key's words in one of
    them: one order on both engines), several micro-batches in each of two runs from one checkpoint."""
    suffix = unique_topic("fold-nested")
    source, on_spark, on_asyncio = f"lines-{suffix}", f"spark-{suffix}", f"asyncio-{suffix}"
    for topic in (source, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=2)
    first = [["apple avocado", "banana", "apricot b!", "berry almond dog d!"], ["nut olive", "orange", "nectar", "o! oat"]]
    second = [["cherry", "blue bean", "acorn cocoa", "ant"], ["pear nut", "plum", "olive", "nut!"]]
    lines: list[Line] = []
    batches: list[dict[int, tuple[int, int]]] = []
    for run, half in enumerate((first, second)):
        records = [(p, run * 4 + i, line, BASE_TS + 10 * (run * 4 + i)) for p, part in enumerate(half) for i, line in enumerate(part)]
        await produce(bootstrap_servers, source, [Rec(f"k{p}-{o}".encode(), line.encode(), partition=p, timestamp_ms=ts)
                                                  for p, o, line, ts in records])  # fmt: skip
        lines.extend(records)
        runner = SparkRunner(nested(source, on_spark), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                             spark=spark, source_options={"maxOffsetsPerTrigger": "4"})  # fmt: skip
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
        batches.extend(_batches(runner.progress[0], source))
        assert len(batches) >= 2 * (run + 1), "several micro-batches per run"
    await run_asyncio_to_end(nested(source, on_asyncio), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")

    records, table = expected_outputs(lines, batches, _nested_step)
    assert await read_table(bootstrap_servers, on_spark, utf8, utf8) == await read_table(bootstrap_servers, on_asyncio, utf8, utf8) == table
    assert (table["o"], table["b"], table["p"], "n" in table) == ("(oat olive)", "((berry blue) bean)", "(pear plum)", False)
    assert await _output_records(bootstrap_servers, on_spark, lambda v: v.decode()) == records, "one record per key and micro-batch"
    assert records["n", None] == 1, "a delete of a stored key is a tombstone"
    assert not [k for k, _ in records if k == "d"], "a key created and deleted within a micro-batch: nothing written"
    state = spark.read.format("statestore").load(str(tmp_path / "checkpoints" / "native-fold-0")).collect()
    assert {r.key.key: bytes(r.value.groupState.value).decode() for r in state} == table, "state: the store serde's bytes"


async def test_an_aggregate_with_a_json_serde_takes_each_keys_values_in_the_documented_order(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Words of one key in both partitions, timestamps interleaved (not monotonic in a partition): the
    counts and sums equal KafkaStreams', the words' order is the documented one in every micro-batch."""
    suffix = unique_topic("fold-tally")
    source, on_spark, on_asyncio = f"lines-{suffix}", f"spark-{suffix}", f"asyncio-{suffix}"
    for topic in (source, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=2)
    parts = [["apple bee", "axe", "bay ant cab", "art", "bit amber", "cup"],
             ["arc", "bug ash", "abc", "cat bog", "arm", "ape cob"]]  # fmt: skip
    offsets = [[30, 10, 50, 40, 80, 70], [20, 60, 0, 90, 55, 100]]  # milliseconds after BASE_TS
    lines: list[Line] = [(p, i, line, BASE_TS + offsets[p][i]) for p, part in enumerate(parts) for i, line in enumerate(part)]
    await produce(bootstrap_servers, source, [Rec(f"k{p}-{o}".encode(), line.encode(), partition=p, timestamp_ms=ts)
                                              for p, o, line, ts in lines])  # fmt: skip
    runner = SparkRunner(tallies(source, on_spark), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "6"})  # fmt: skip
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    batches = _batches(runner.progress[0], source)
    assert len(batches) >= 2
    await run_asyncio_to_end(tallies(source, on_asyncio), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")

    records, table = expected_outputs(lines, batches, _tally_step)
    spark_table = await read_table(bootstrap_servers, on_spark, utf8, json.loads)
    asyncio_table = await read_table(bootstrap_servers, on_asyncio, utf8, json.loads)
    assert spark_table == table
    assert {k: (v["key"], v["count"], v["letters"], sorted(v["words"])) for k, v in spark_table.items()} == {
        k: (v["key"], v["count"], v["letters"], sorted(v["words"])) for k, v in asyncio_table.items()}
    assert await _output_records(bootstrap_servers, on_spark, json.loads) == records, "one record per key and micro-batch"


def by_length(source: str, output: str) -> Topology:
    """Without a repartition topic (group_by_key): tuples reach the aggregate (pickled across Spark's
    shuffle), an order-sensitive fold of their lengths kept with the Long serde."""
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).map_values(lambda line: (len(line), line))
     .group_by_key().aggregate(lambda: 1, lambda key, pair, total: (total * 31 + pair[0]) % 1_000_003,
                               Materialized.with_(S, Serdes.Long()))
     .to_stream().to(output, Produced.with_(S, Serdes.Long())))  # fmt: skip
    return builder.build()


async def test_an_aggregate_without_repartition_matches_kafka_streams(bootstrap_servers: str, spark: Any,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    suffix = unique_topic("fold-length")
    source, on_spark, on_asyncio = f"lines-{suffix}", f"spark-{suffix}", f"asyncio-{suffix}"
    for topic in (source, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=1)
    lines = [("a", "x"), ("b", "yy"), ("a", "zzz"), ("a", "w"), ("b", "vvvv"), ("c", "u"), ("a", "tt")]
    await produce(bootstrap_servers, source, [Rec(k.encode(), v.encode(), partition=0) for k, v in lines])
    runner = SparkRunner(by_length(source, on_spark), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "3"})  # fmt: skip
    (query,) = runner.plan().queries
    assert query.native is not None and query.native.kind == "ordered-fold" and query.native.bypassed_topic is None
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(by_length(source, on_asyncio), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")
    expected: dict[str, int] = {}
    for key, line in lines:
        expected[key] = (expected.get(key, 1) * 31 + len(line)) % 1_000_003
    assert await read_table(bootstrap_servers, on_spark, utf8, long_be) == await read_table(
        bootstrap_servers, on_asyncio, utf8, long_be) == expected  # fmt: skip
