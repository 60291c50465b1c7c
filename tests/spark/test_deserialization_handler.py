"""`default.deserialization.exception.handler` on Spark: a poison record in every stage kind.

Each input topic holds the same records, one of them a value that is not UTF-8 (the String serde
refuses it). With `log_and_continue` every stage (stateless, keyed, task, and the native count,
windowed count and fold) skips it, counts it and goes on; with `dead_letter` the Python stages
write it to the dead-letter topic with KIP-1034's headers, as the runtime does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streams_core import Materialized, Serdes, StreamsBuilder, TimeWindows
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, utf8

POISON = b"\xff\xfe not utf-8"
RECORDS = [(b"a", b"x"), (b"b", b"y"), (b"a", POISON), (b"a", b"z")]
STRINGS = {"key_serde": Serdes.String(), "value_serde": Serdes.String()}


async def poisoned_topics(bootstrap: str, suffix: str, names: list[str]) -> dict[str, str]:
    topics = {name: f"{name}-in-{suffix}" for name in names}
    for topic in topics.values():
        await create_topic(bootstrap, topic, partitions=1)
        await produce(bootstrap, topic, [Rec(k, v, timestamp_ms=BASE_TS + i) for i, (k, v) in enumerate(RECORDS)])
    return topics


async def test_log_and_continue_skips_and_counts_a_poison_record_in_every_stage(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("poison")
    names = ["stateless", "keyed", "task", "count", "window", "fold"]
    inputs = await poisoned_topics(bootstrap_servers, suffix, names)
    out = {name: f"{name}-out-{suffix}" for name in names}
    for topic in out.values():
        await create_topic(bootstrap_servers, topic, partitions=1)

    builder = StreamsBuilder()
    window = TimeWindows.of_size_with_no_grace(3_600_000)
    builder.stream(inputs["stateless"], **STRINGS).map_values(str.upper).to(out["stateless"])
    (builder.stream(inputs["keyed"], **STRINGS).group_by_key().count(Materialized.as_("keyed").with_caching_disabled())
     .to_stream().to(out["keyed"], value_serde=Serdes.Long()))
    (builder.stream(inputs["task"], **STRINGS).group_by_key().windowed_by(window)  # caching off: the task stage
     .reduce(lambda a, b: a + b, Materialized.as_("task").with_caching_disabled())
     .to_stream().map(lambda wk, v: (wk.key, v)).to(out["task"], **STRINGS))
    builder.stream(inputs["count"], **STRINGS).group_by_key().count().to_stream().to(out["count"], value_serde=Serdes.Long())
    (builder.stream(inputs["window"], **STRINGS).group_by_key().windowed_by(window).count()
     .to_stream().map(lambda wk, n: (wk.key, str(n))).to(out["window"], **STRINGS))
    builder.stream(inputs["fold"], **STRINGS).group_by_key().reduce(lambda a, b: a + b).to_stream().to(out["fold"], **STRINGS)
    runner = SparkRunner(builder.build(), {
        "application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers,
        "default.deserialization.exception.handler": "log_and_continue",
    }, spark=spark)  # fmt: skip
    plan = runner.plan()
    by_input = {name: next(q for q in plan.queries if inputs[name] in q.source_topics) for name in names}
    assert {name: q.stage for name, q in by_input.items()} == {
        "stateless": "stateless", "keyed": "keyed", "task": "task", "count": "native", "window": "native", "fold": "native",
    }  # fmt: skip
    assert by_input["window"].native.window is not None and by_input["fold"].native.kind == "ordered-fold"  # type: ignore[union-attr]

    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")

    assert await read_table(bootstrap_servers, out["stateless"], utf8, utf8) == {"a": "Z", "b": "Y"}
    assert len(await read_all(bootstrap_servers, out["stateless"])) == 3
    for name in ("keyed", "count"):
        assert await read_table(bootstrap_servers, out[name], utf8, long_be) == {"a": 2, "b": 1}, name
    assert await read_table(bootstrap_servers, out["task"], utf8, utf8) == {"a": "xz", "b": "y"}
    assert await read_table(bootstrap_servers, out["window"], utf8, utf8) == {"a": "2", "b": "1"}
    assert await read_table(bootstrap_servers, out["fold"], utf8, utf8) == {"a": "xz", "b": "y"}
    assert runner.skipped_records == {q.subtopology_id: 1 for q in plan.queries}, "one poison record per query, counted"


async def test_dead_letter_writes_the_poison_record_to_its_topic_from_the_python_stages(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("dlq")
    inputs = await poisoned_topics(bootstrap_servers, suffix, ["stateless", "reduce"])
    dead, stateless_out, reduce_out = f"dead-{suffix}", f"stateless-out-{suffix}", f"reduce-out-{suffix}"
    for topic in (dead, stateless_out, reduce_out):
        await create_topic(bootstrap_servers, topic, partitions=1)
    builder = StreamsBuilder()
    builder.stream(inputs["stateless"], **STRINGS).map_values(str.upper).to(stateless_out)
    builder.stream(inputs["reduce"], **STRINGS).group_by_key().reduce(lambda a, b: a + b).to_stream().to(reduce_out)
    runner = SparkRunner(builder.build(), {
        "application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers,
        "default.deserialization.exception.handler": "dead_letter", "errors.dead.letter.queue.topic.name": dead,
    }, spark=spark)  # fmt: skip
    reduce_query = next(q for q in runner.plan().queries if inputs["reduce"] in q.source_topics)
    assert reduce_query.stage == "keyed", "the native fold has no output for dead letters"
    assert reduce_query.not_native.startswith("the dead_letter deserialization handler")

    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")

    letters = await read_all(bootstrap_servers, dead)
    assert sorted((r.key, r.value) for r in letters) == [(b"a", POISON)] * 2
    origins = sorted(dict(r.headers)["__streams.errors.topic"].decode() for r in letters)
    assert origins == sorted(inputs.values())
    assert all(dict(r.headers)["__streams.errors.offset"] == b"2" for r in letters)
    assert await read_table(bootstrap_servers, reduce_out, utf8, utf8) == {"a": "xz", "b": "y"}
    assert sorted(runner.skipped_records.values()) == [1, 1]
