"""Path keys parsed by key serdes, stored objects rendered as JSON, and the merge order."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from api.keys import KeyCodec, render
from streams_core import Serdes, TimeWindow, Windowed


@pytest.mark.parametrize(
    ("serde", "text", "key"),
    [
        (Serdes.String(), "héllo wörld", "héllo wörld"),
        (Serdes.Long(), "-42", -42),
        (Serdes.Long(), str(2**63 - 1), 2**63 - 1),
        (Serdes.Integer(), "7", 7),
        (Serdes.Double(), "2.5", 2.5),
        (Serdes.Double(), "-Infinity", -math.inf),
        (Serdes.Bytes(), "abc", b"abc"),
        (Serdes.Json(), '{"a": [1, 2]}', {"a": [1, 2]}),
        (Serdes.Json(), '"text"', "text"),
        (Serdes.from_functions(lambda s: s.encode(), bytes.decode, "Custom"), "raw", "raw"),
    ],
)
def test_keys_are_parsed_by_their_serde(serde: object, text: str, key: object) -> None:
    assert KeyCodec.for_serde(serde).parse(text) == key  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("serde", "text"),
    [
        (Serdes.Long(), "1.0"),
        (Serdes.Long(), "1_000"),
        (Serdes.Long(), str(2**63)),
        (Serdes.Integer(), str(2**31)),
        (Serdes.Double(), "abc"),
        (Serdes.Double(), "nan"),
        (Serdes.Double(), " 1"),
        (Serdes.Json(), "{not json"),
        (Serdes.Json(), "NaN"),
        (Serdes.from_functions(lambda s: int(s).to_bytes(2, "big"), bytes.decode, "Short"), "x"),
    ],
)
def test_unparsable_keys_are_value_errors_naming_the_serde(serde: object, text: str) -> None:
    codec = KeyCodec.for_serde(serde)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=codec.kind):
        codec.parse(text)


def test_nan_keys_parse_and_render_back() -> None:
    codec = KeyCodec.for_serde(Serdes.Double())
    assert math.isnan(codec.parse("NaN"))
    assert render(codec.parse("NaN")) == "NaN"
    assert codec.sort_key("NaN") == Serdes.Double().serialize(None, math.nan)


@pytest.mark.parametrize(
    ("serde", "keys"),
    [
        (Serdes.Long(), [-3, -1, 0, 5, 2**40]),
        (Serdes.String(), ["a", "B", "é", "z"]),
        (Serdes.Double(), [-1.5, 0.0, 2.0, math.inf]),
        (Serdes.Bytes(), [b"a", b"\x7f"]),
        (Serdes.Json(), [{"b": 1}, [1, 2], "s", 3]),
    ],
)
def test_sort_key_of_a_rendered_key_is_its_serialized_bytes(serde: object, keys: list[object]) -> None:
    codec = KeyCodec.for_serde(serde)  # type: ignore[arg-type]
    for key in keys:
        assert codec.sort_key(render(key)) == serde.serialize(None, key)  # type: ignore[attr-defined]


@dataclass
class Point:
    x: int
    label: bytes


def test_render() -> None:
    assert render(b"caf\xc3\xa9") == "café"
    assert render(b"\xff\x00") == "/wA="
    assert render(Windowed("k", TimeWindow(0, 60_000))) == {"key": "k", "windowStart": 0, "windowEnd": 60_000}
    assert render(math.inf) == "Infinity"
    assert render({1: (2.5, None), "s": {b"x"}}) == {"1": [2.5, None], "s": ["x"]}
    assert render(Point(1, b"p")) == {"x": 1, "label": "p"}
    assert render(ValueError("odd")) == "odd"
