"""How the console tools read values from text and print decoded ones, by serde name."""

from __future__ import annotations

import pytest

from streams_core import Serdes
from streams_core.tools.console import format_value, parse_value


@pytest.mark.parametrize(("serde", "text", "value"), [
    (Serdes.String(), "hello", "hello"),
    (Serdes.Long(), "-42", -42),
    (Serdes.Integer(), "7", 7),
    (Serdes.Double(), "2.5", 2.5),
    (Serdes.Json(), '{"a": [1, 2]}', {"a": [1, 2]}),
    (Serdes.Bytes(), "raw", b"raw"),
])  # fmt: skip
def test_parse_value(serde: object, text: str, value: object) -> None:
    assert parse_value(serde, text) == value  # type: ignore[arg-type]


def test_parse_value_refuses_text_the_serde_cannot_read() -> None:
    with pytest.raises(ValueError):
        parse_value(Serdes.Long(), "ten")
    with pytest.raises(ValueError):
        parse_value(Serdes.Json(), "{not json")


@pytest.mark.parametrize(("value", "text"), [
    (None, "null"), ("text", "text"), (3, "3"), (2.5, "2.5"), (True, "true"), (b"raw", "raw"),
    ({"user": "alice", "clicks": [1, 2]}, '{"user":"alice","clicks":[1,2]}'),
])  # fmt: skip
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text
