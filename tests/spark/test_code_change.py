"""A checkpoint written before a change to the user functions' module still restores (issue 23).

The user's module lives in a file of its own (tmp_path), shipped to the Python workers by value
as a module not installed on them would be (`cloudpickle.register_pickle_by_value`). A job runs,
the module is rewritten with edited but compatible functions (and its aggregate class renamed,
reshaped, its serde writing the same bytes), and the job runs again from the same checkpoint on
new input: the totals are those of the first run carried on by the edited functions.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from streams_core import Grouped, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, utf8

S = Serdes.String()

VERSION_1 = '''
import json
from dataclasses import dataclass

from streams_core.serde import Serde


def words(line):
    return line.split()


@dataclass
class Tally:
    count: int
    letters: int


def start():
    return Tally(0, 0)


def add(word, _, tally):
    return Tally(tally.count + 1, tally.letters + len(word))


def shown(tally):
    return f"{tally.count}/{tally.letters}"


class TallySerde(Serde):
    def serialize(self, topic, tally):
        return None if tally is None else json.dumps({"count": tally.count, "letters": tally.letters}).encode()

    def deserialize(self, topic, data):
        return None if data is None else Tally(**json.loads(data))
'''

VERSION_2 = '''
import json

from streams_core.serde import Serde


def words(line):
    return [w.lower() for w in line.split() if w]


class Totals:
    __slots__ = ("letters", "seen")

    def __init__(self, seen, letters):
        self.seen, self.letters = seen, letters


def start():
    return Totals(0, 0)


def add(word, _, totals):
    return Totals(totals.seen + 1, totals.letters + len(word))


def shown(totals):
    return f"{totals.seen}/{totals.letters}"


class TallySerde(Serde):
    def serialize(self, topic, totals):
        return None if totals is None else json.dumps({"count": totals.seen, "letters": totals.letters}).encode()

    def deserialize(self, topic, data):
        if data is None:
            return None
        fields = json.loads(data)
        return Totals(fields["count"], fields["letters"])
'''

FIRST = ["Spark streams", "kafka Streams spark", "table"]
SECOND = ["SPARK join", "Kafka table TABLE"]


@pytest.fixture
def user_module(tmp_path: Path) -> Iterator[Any]:
    """`load(source)` writes the user's module and (re)imports it, registered to ship by value."""
    import cloudpickle  # the package the runner ships topologies with (not PySpark's vendored copy)

    name = f"user_functions_{unique_topic('m').replace('-', '_')}"
    path = tmp_path / f"{name}.py"

    def load(source: str) -> ModuleType:
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        cloudpickle.register_pickle_by_value(module)
        return module

    try:
        yield load
    finally:
        if name in sys.modules:
            cloudpickle.unregister_pickle_by_value(sys.modules.pop(name))


def word_count(module: ModuleType, source: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(module.words)
     .group_by(lambda _, word: word, Grouped.with_(S, S)).count().to_stream().to(sink, Produced.with_(S, Serdes.Long())))
    return builder.build()


def word_tallies(module: ModuleType, source: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=S, value_serde=S).flat_map_values(module.words)
     .group_by(lambda _, word: word, Grouped.with_(S, S))
     .aggregate(module.start, module.add, Materialized.with_(S, module.TallySerde()))
     .map_values(module.shown).to_stream().to(sink, Produced.with_(S, S)))
    return builder.build()


async def test_a_checkpoint_restores_after_the_user_functions_module_changed(
    bootstrap_servers: str, spark: Any, tmp_path: Path, user_module: Any
) -> None:
    suffix = unique_topic("code")
    source, counts, tallies = f"lines-{suffix}", f"counts-{suffix}", f"tallies-{suffix}"
    for topic in (source, counts, tallies):
        await create_topic(bootstrap_servers, topic, partitions=2)
    config = {"bootstrap.servers": bootstrap_servers}

    async def run(module: ModuleType, lines: list[str], start: int) -> None:
        await produce(bootstrap_servers, source, [Rec(f"k{start + i}".encode(), line.encode(), timestamp_ms=BASE_TS + start + i)
                                                  for i, line in enumerate(lines)])
        counting = SparkRunner(word_count(module, source, counts), {**config, "application.id": f"count-{suffix}"},
                               spark=spark)  # fmt: skip
        assert [q.stage for q in counting.plan().queries] == ["native"]
        await asyncio.to_thread(counting.run, "available_now", tmp_path / "count-checkpoints")
        tallying = SparkRunner(word_tallies(module, source, tallies), {**config, "application.id": f"tally-{suffix}"},
                               spark=spark)  # fmt: skip
        assert [q.stage for q in tallying.plan().queries] == ["stateless", "keyed"]
        await asyncio.to_thread(tallying.run, "available_now", tmp_path / "tally-checkpoints")

    first = [w for line in FIRST for w in line.split()]
    await run(user_module(VERSION_1), FIRST, 0)
    assert await read_table(bootstrap_servers, counts, utf8, long_be) == dict(Counter(first))
    assert await read_table(bootstrap_servers, tallies, utf8, utf8) == {w: f"{n}/{n * len(w)}" for w, n in Counter(first).items()}

    # The keyed stage's Spark state is the store's changelog: key bytes -> timestamp + serde bytes.
    state = spark.read.format("statestore").option("stateVarName", "changelog").load(
        str(tmp_path / "tally-checkpoints" / "subtopology-1")).collect()  # fmt: skip
    assert {r.user_map_key.topic for r in state} == {f"tally-{suffix}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"}
    assert all(r.key.key == r.user_map_key.key for r in state), "one key's entries in its own state"
    assert {r.user_map_key.key.decode(): json.loads(r.user_map_value.value[8:]) for r in state} == {
        w: {"count": n, "letters": n * len(w)} for w, n in Counter(first).items()
    }
    words = first + [w.lower() for line in SECOND for w in line.split()]  # the edited `words` lowercases
    await run(user_module(VERSION_2), SECOND, len(FIRST))
    assert await read_table(bootstrap_servers, counts, utf8, long_be) == dict(Counter(words))
    assert await read_table(bootstrap_servers, tallies, utf8, utf8) == {w: f"{n}/{n * len(w)}" for w, n in Counter(words).items()}


@pytest.mark.parametrize(("stage", "found", "expected"), [
    ("keyed", "pickled-v1", "changelog-bytes-v2"), ("task", "row-changelog-v1", "pandas-changelog-v2"),
])  # fmt: skip
async def test_a_checkpoint_of_a_stages_first_state_layout_is_refused(
    bootstrap_servers: str, spark: Any, tmp_path: Path, stage: str, found: str, expected: str
) -> None:
    """The keyed stage's first layout (one pickled dict per key) and the task stage's (the Row API)
    are not misread: `run()` names the format before any query starts."""
    from streams_core.errors import StreamsError

    suffix = unique_topic(f"old-{stage}")
    source, sink = f"lines-{suffix}", f"out-{suffix}"
    for topic in (source, sink):
        await create_topic(bootstrap_servers, topic, partitions=1)
    builder = StreamsBuilder()
    grouped = builder.stream(source, key_serde=S, value_serde=S).group_by_key()
    if stage == "keyed":
        grouped.reduce(lambda a, b: a + b).to_stream().to(sink, Produced.with_(S, S))
    else:
        (grouped.windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count().to_stream()
         .map(lambda wk, n: (wk.key, str(n))).to(sink, Produced.with_(S, S)))
    # Caching off: the windowed count runs in the task stage (with caching on it compiles natively).
    config = {"application.id": f"old-{suffix}", "bootstrap.servers": bootstrap_servers, "statestore.cache.max.bytes": 0}
    runner = SparkRunner(builder.build(), config, spark=spark)
    (query,) = [q for q in runner.plan().queries if q.stage == stage]
    old = tmp_path / "checkpoints" / f"subtopology-{query.subtopology_id}"
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text("v1")  # a checkpoint with progress and no state-format mark
    with pytest.raises(StreamsError, match=f"format '{found}'.*'{expected}'"):
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    assert not (tmp_path / "checkpoints" / f"subtopology-{query.subtopology_id}.state-format").exists()
    assert not (tmp_path / "checkpoints" / f"subtopology-{query.subtopology_id}" / "commits").exists(), "no query ran"
