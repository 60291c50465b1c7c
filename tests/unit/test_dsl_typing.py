"""The DSL is generic as Kafka Streams' is: a user's mypy follows key and value types through a chain.

One mypy run checks a user's module: `assert_type` lines state what each operator infers (the
word count is a `KTable[str, int]`, windowed keys are `Windowed[K]`), and lines ending in
`# E: <code>` must be reported with exactly that error code (a wrong-typed lambda in a chain).
The tree's own `.mypy_cache` keeps the run to a few seconds once streams_core has been checked.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = textwrap.dedent(
    """
    from typing import Any, assert_type

    from streams_core import (
        Branched, Consumed, FixedKeyProcessor, FixedKeyRecord, JoinWindows, KGroupedStream, KStream, KTable,
        Materialized, Named, Processor, Record, Serdes, SessionWindows, StreamsBuilder, TimeWindows,
        ValueTransformerWithKey, Windowed,
    )


    class WordLength(Processor[str, str, str, int]):
        def process(self, record: Record[str, str]) -> None: ...


    class FixedLength(FixedKeyProcessor[str, str, int]):
        def process(self, record: FixedKeyRecord[str, str]) -> None: ...


    class CountText(ValueTransformerWithKey[str, int, str]):
        def transform(self, read_only_key: str, value: int | None) -> str | None: ...

    builder = StreamsBuilder()
    lines = builder.stream("text-lines", key_serde=Serdes.String(), value_serde=Serdes.String())
    assert_type(lines, KStream[str, str])
    words = lines.flat_map_values(lambda line: line.lower().split())
    assert_type(words, KStream[str, str])
    grouped = words.group_by(lambda key, word: word)
    assert_type(grouped, KGroupedStream[str, str])
    counts = grouped.count(Materialized.as_("word-count"))
    assert_type(counts, KTable[str, int])

    lengths = words.map_values(lambda word: len(word))
    assert_type(lengths, KStream[str, int])
    assert_type(words.map_values(lambda key, word: (key, word)), KStream[str, tuple[str, str]])
    assert_type(words.map(lambda key, word: (len(word), key)), KStream[int, str])
    assert_type(words.select_key(lambda key, word: len(word)), KStream[int, str])
    assert_type(words.filter(lambda key, word: word.startswith("a")), KStream[str, str])
    assert_type(counts.to_stream(), KStream[str, int])
    assert_type(counts.to_stream(lambda word, count: word.upper()), KStream[str, int])
    assert_type(counts.map_values(lambda count: str(count)), KTable[str, str])

    assert_type(words.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count(),
                KTable[Windowed[str], int])
    assert_type(words.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(1_000)).count(),
                KTable[Windowed[str], int])
    assert_type(lengths.group_by_key().aggregate(lambda: 0.0, lambda key, length, total: total + length),
                KTable[str, float])
    assert_type(lengths.group_by_key().reduce(lambda a, b: a + b), KTable[str, int])
    assert_type(counts.group_by(lambda word, count: (word[:1], count)).reduce(lambda a, b: a + b, lambda a, b: a - b),
                KTable[str, int])
    assert_type(lengths.group_by_key().cogroup(lambda key, n, total: total + n)
                .cogroup(words.group_by_key(), lambda key, word, total: total + len(word)).aggregate(lambda: 0),
                KTable[str, int])

    assert_type(builder.stream("numbers", Consumed.with_(Serdes.String(), Serdes.Long())), KStream[str, int])
    assert_type(builder.table("totals", key_serde=Serdes.String(), value_serde=Serdes.Double()), KTable[str, float])
    assert_type(lengths.join(counts, lambda length, count: length * count), KStream[str, int])
    assert_type(lengths.left_join(counts, lambda length, count: (length, count)), KStream[str, tuple[int, int | None]])
    assert_type(words.join(lengths, lambda word, length: word * length, JoinWindows.of_time_difference_with_no_grace(10)),
                KStream[str, str])
    branches = words.split(Named.as_("b-")).branch(lambda key, word: word.startswith("a"), Branched.as_("a"))
    assert_type(branches.default_branch(), dict[str, KStream[Any, Any]])
    assert_type(words.process(WordLength), KStream[str, int])
    assert_type(words.process_values(FixedLength), KStream[str, int])
    assert_type(counts.transform_values(CountText), KTable[str, str])
    reveal_type(builder.stream("untyped"))

    words.map_values(lambda word: word + 1)  # E: operator
    lengths.filter(lambda key, length: length.startswith("a"))  # E: attr-defined
    counts.to_stream().to("word-counts", value_serde=Serdes.String())  # E: arg-type
    lengths.left_join(counts, lambda length, count: length + count)  # E: operator
    words.merge(lengths)  # E: arg-type
    lengths.process(WordLength)  # E: arg-type
    """
)


def test_a_users_dsl_chain_is_typed(tmp_path: Path) -> None:
    source = tmp_path / "user_chain.py"
    source.write_text(USER_CODE)
    stdout, stderr, _ = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache"), str(source)]
    )
    reported = {
        (int(m.group(1)), m.group(2))
        for m in re.finditer(r"user_chain\.py:(\d+): error: .*\[([a-z-]+)\]$", stdout, re.MULTILINE)
    }
    expected = {
        (number, m.group(1))
        for number, line in enumerate(USER_CODE.splitlines(), 1)
        if (m := re.search(r"# E: ([a-z-]+)$", line))
    }
    assert len(expected) == 6
    assert reported == expected, stdout + stderr
    assert 'Revealed type is "streams_core.kstream.kstream.KStream[Any, Any]"' in stdout, stdout
