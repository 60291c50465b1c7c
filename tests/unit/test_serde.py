"""Serdes: round trips, byte layouts identical to Java's serializers, and located errors."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest

from streams_core import DeserializationError, Serde, Serdes, SerializationError
from streams_core.errors import ConfigError
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from streams_core.serde import resolve_serde

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

ALL_SERDES = [Serdes.Bytes(), Serdes.String(), Serdes.Integer(), Serdes.Long(), Serdes.Double(), Serdes.Json()]


def roundtrip(serde: Serde[Any], value: Any) -> Any:
    data = serde.serialize("topic", value)
    assert isinstance(data, bytes)
    return serde.deserialize("topic", data)


# --- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (Serdes.Bytes(), b""),
        (Serdes.Bytes(), b"\x00\xff raw"),
        (Serdes.String(), ""),
        (Serdes.String(), "hello"),
        (Serdes.String(), "héllo wörld ✓ 日本語 🎉"),
        (Serdes.Integer(), 0),
        (Serdes.Integer(), INT_MIN),
        (Serdes.Integer(), INT_MAX),
        (Serdes.Long(), 0),
        (Serdes.Long(), 42),
        (Serdes.Long(), LONG_MIN),
        (Serdes.Long(), LONG_MAX),
        (Serdes.Double(), 0.0),
        (Serdes.Double(), -1.5),
        (Serdes.Double(), 1e308),
        (Serdes.Double(), math.inf),
        (Serdes.Json(), {"a": [1, 2.5, None, True], "b": {"c": "d"}}),
        (Serdes.Json(), [1, "two"]),
        (Serdes.Json(), "text"),
        (Serdes.Json(), 7),
        (Serdes.Json(), False),
        (Serdes.Json(), {"ключ": "値"}),
    ],
)
def test_roundtrip(serde: Serde[Any], value: Any) -> None:
    assert roundtrip(serde, value) == value


def test_double_nan_roundtrips() -> None:
    assert math.isnan(roundtrip(Serdes.Double(), math.nan))


def test_double_accepts_an_int() -> None:
    assert roundtrip(Serdes.Double(), 3) == 3.0


def test_bytes_accepts_bytearray_and_memoryview() -> None:
    assert Serdes.Bytes().serialize("t", bytearray(b"ab")) == b"ab"
    assert Serdes.Bytes().serialize("t", memoryview(b"cd")) == b"cd"
    assert Serdes.ByteArray() is Serdes.Bytes()


@pytest.mark.parametrize("serde", ALL_SERDES, ids=repr)
def test_none_maps_to_none_both_ways(serde: Serde[Any]) -> None:
    assert serde.serialize("topic", None) is None
    assert serde.deserialize("topic", None) is None


@pytest.mark.parametrize("serde", ALL_SERDES, ids=repr)
def test_factories_return_shared_instances_with_java_like_names(serde: Serde[Any]) -> None:
    assert repr(serde).startswith("Serdes.")
    assert getattr(Serdes, serde.name)() is serde


# --- byte layouts as Java writes them --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (0, "0000000000000000"),
        (1, "0000000000000001"),
        (-1, "ffffffffffffffff"),
        (256, "0000000000000100"),
        (LONG_MAX, "7fffffffffffffff"),
        (LONG_MIN, "8000000000000000"),
        (1_700_000_000_000, "0000018bcfe56800"),
    ],
)
def test_long_is_8_byte_big_endian_twos_complement_like_java(value: int, hex_bytes: str) -> None:
    assert Serdes.Long().serialize("t", value) == bytes.fromhex(hex_bytes)
    assert Serdes.Long().deserialize("t", bytes.fromhex(hex_bytes)) == value
    assert Serdes.Long().serialize("t", value) == struct.pack(">q", value)


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [(0, "00000000"), (1, "00000001"), (-1, "ffffffff"), (INT_MAX, "7fffffff"), (INT_MIN, "80000000")],
)
def test_integer_is_4_byte_big_endian_like_java(value: int, hex_bytes: str) -> None:
    assert Serdes.Integer().serialize("t", value) == bytes.fromhex(hex_bytes)
    assert Serdes.Integer().deserialize("t", bytes.fromhex(hex_bytes)) == value


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (1.0, "3ff0000000000000"),
        (-2.0, "c000000000000000"),
        (0.5, "3fe0000000000000"),
        (0.0, "0000000000000000"),
        (-0.0, "8000000000000000"),
        (math.inf, "7ff0000000000000"),
        (-math.inf, "fff0000000000000"),
    ],
)
def test_double_is_ieee754_big_endian_like_java(value: float, hex_bytes: str) -> None:
    data = Serdes.Double().serialize("t", value)
    assert data == bytes.fromhex(hex_bytes)
    assert data == struct.pack(">d", value)
    assert Serdes.Double().deserialize("t", data) == value


def test_double_nan_is_javas_canonical_nan() -> None:
    assert Serdes.Double().serialize("t", math.nan) == bytes.fromhex("7ff8000000000000")


def test_string_is_utf8_without_bom_or_length() -> None:
    assert Serdes.String().serialize("t", "é✓") == "é✓".encode()
    assert Serdes.String().serialize("t", "é✓") == b"\xc3\xa9\xe2\x9c\x93"


def test_json_is_compact_utf8() -> None:
    data = Serdes.Json().serialize("t", {"a": 1, "b": [1, 2], "é": "✓"})
    assert data == '{"a":1,"b":[1,2],"é":"✓"}'.encode()
    assert json.loads(data) == {"a": 1, "b": [1, 2], "é": "✓"}


# --- serialization errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("serde", "value", "expects"),
    [
        (Serdes.Bytes(), "text", "bytes"),
        (Serdes.String(), b"bytes", "str"),
        (Serdes.String(), 5, "str"),
        (Serdes.Integer(), "5", "int"),
        (Serdes.Integer(), 1.0, "int"),
        (Serdes.Integer(), True, "int"),
        (Serdes.Long(), "5", "int"),
        (Serdes.Long(), 2.5, "int"),
        (Serdes.Long(), False, "int"),
        (Serdes.Double(), "1.0", "float"),
        (Serdes.Double(), True, "float"),
    ],
)
def test_wrong_types_raise_serialization_error(serde: Serde[Any], value: Any, expects: str) -> None:
    with pytest.raises(SerializationError) as info:
        serde.serialize("orders", value)
    assert expects in str(info.value)
    assert type(value).__name__ in str(info.value)
    assert info.value.topic == "orders"
    assert "topic=orders" in str(info.value)


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (Serdes.Integer(), INT_MAX + 1),
        (Serdes.Integer(), INT_MIN - 1),
        (Serdes.Long(), LONG_MAX + 1),
        (Serdes.Long(), LONG_MIN - 1),
        (Serdes.Double(), 10**400),
    ],
)
def test_out_of_range_numbers_raise_serialization_error(serde: Serde[Any], value: int) -> None:
    with pytest.raises(SerializationError, match="cannot encode"):
        serde.serialize("t", value)


def test_string_with_lone_surrogate_raises_serialization_error() -> None:
    with pytest.raises(SerializationError, match="UTF-8"):
        Serdes.String().serialize("t", "bad \ud800")


@pytest.mark.parametrize("value", [{1, 2}, object(), math.nan, {"x": math.inf}])
def test_json_that_cannot_be_encoded_raises_serialization_error(value: Any) -> None:
    with pytest.raises(SerializationError, match="Json serde cannot encode"):
        Serdes.Json().serialize("t", value)


# --- deserialization errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("serde", "data", "reason"),
    [
        (Serdes.Long(), b"\x00" * 4, "Long serde expects 8 bytes, got 4"),
        (Serdes.Long(), b"\x00" * 9, "Long serde expects 8 bytes, got 9"),
        (Serdes.Long(), b"", "Long serde expects 8 bytes, got 0"),
        (Serdes.Integer(), b"\x00" * 8, "Integer serde expects 4 bytes, got 8"),
        (Serdes.Double(), b"\x00" * 3, "Double serde expects 8 bytes, got 3"),
        (Serdes.String(), b"ok \xff\xfe", "invalid UTF-8"),
        (Serdes.Json(), b"{not json", "invalid JSON"),
        (Serdes.Json(), b"\xff\xfe\xfd", "invalid JSON"),
        (Serdes.Json(), b"", "invalid JSON"),
    ],
)
def test_bad_bytes_raise_deserialization_error_located_by_at(serde: Serde[Any], data: bytes, reason: str) -> None:
    with pytest.raises(DeserializationError) as info:
        serde.deserialize("orders", data)
    assert reason in str(info.value)
    located = info.value.at("orders", 3, 1042)
    assert (located.topic, located.partition, located.offset) == ("orders", 3, 1042)
    assert located.reason == info.value.reason
    assert str(located) == f"{info.value.reason} (topic=orders, partition=3, offset=1042)"
    assert reason in str(located)
    assert located.__cause__ is not None


def test_invalid_utf8_message_says_where() -> None:
    with pytest.raises(DeserializationError, match="at byte 3"):
        Serdes.String().deserialize("t", b"abc\xff")


def test_deserialization_error_keeps_the_original_cause() -> None:
    with pytest.raises(DeserializationError) as info:
        Serdes.Json().deserialize("t", b"{")
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.at("t", 0, 0).__cause__ is info.value.__cause__


# --- from_functions --------------------------------------------------------------------------------


def test_from_functions_roundtrip() -> None:
    serde = Serdes.from_functions(lambda v: str(v).encode(), lambda b: int(b.decode()), name="IntText")
    assert serde.serialize("t", 12) == b"12"
    assert serde.deserialize("t", b"12") == 12
    assert serde.serialize("t", None) is None and serde.deserialize("t", None) is None
    assert repr(serde) == "Serdes.from_functions(name='IntText')"


def test_from_functions_wraps_serializer_exceptions() -> None:
    def boom(value: Any) -> bytes:
        raise RuntimeError("no way")

    serde = Serdes.from_functions(boom, bytes, name="Boom")
    with pytest.raises(SerializationError, match="Boom serializer failed: no way") as info:
        serde.serialize("events", 1)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert info.value.topic == "events"


def test_from_functions_wraps_deserializer_exceptions() -> None:
    serde = Serdes.from_functions(bytes, lambda b: int(b), name="Num")
    with pytest.raises(DeserializationError, match="Num deserializer failed") as info:
        serde.deserialize("t", b"x")
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.at("t", 1, 2).offset == 2


def test_from_functions_serializer_must_return_bytes() -> None:
    serde = Serdes.from_functions(lambda v: v, lambda b: b, name="Str")
    with pytest.raises(SerializationError, match="must return bytes, returned str"):
        serde.serialize("t", "text")
    assert Serdes.from_functions(bytearray, bytes).serialize("t", b"ab") == b"ab"


# --- resolve_serde ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "serde"),
    [
        ("bytes", Serdes.Bytes()),
        ("ByteArray", Serdes.Bytes()),
        (" string ", Serdes.String()),
        ("INTEGER", Serdes.Integer()),
        ("long", Serdes.Long()),
        ("double", Serdes.Double()),
        ("json", Serdes.Json()),
        ("streams_core.serde.Serdes.Long", Serdes.Long()),
        ("streams_core.Serdes.String", Serdes.String()),
        ("org.apache.kafka.common.serialization.Serdes$BytesSerde", Serdes.Bytes()),
    ],
)
def test_resolve_serde_by_name(name: str, serde: Serde[Any]) -> None:
    assert resolve_serde(name) is serde


@pytest.mark.parametrize("bad", ["", "nope", ".relative", "..up", "os.path.nope", "streams_core.serde.Missing"])
def test_resolve_serde_errors_name_the_key(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_serde(bad, "value.serde")
    assert info.value.key == "value.serde"
    assert "cannot resolve serde" in str(info.value)


def test_resolve_serde_rejects_a_factory_needing_arguments() -> None:
    def factory(required: int) -> Serde[Any]:
        return Serdes.Long()

    with pytest.raises(ConfigError, match="cannot create a serde"):
        resolve_serde(factory, "k")


# --- ValueAndTimestamp (the bytes of a table's store) ---------------------------------------------


@pytest.mark.parametrize("value", [0, 1, -1, LONG_MIN, LONG_MAX, 123_456_789])
@pytest.mark.parametrize("timestamp", [-1, 0, 1_700_000_000_000])
def test_value_and_timestamp_of_a_long_is_java_layout(value: int, timestamp: int) -> None:
    serde = ValueAndTimestampSerde(Serdes.Long())
    data = serde.serialize("t", ValueAndTimestamp(value, timestamp))
    assert data == struct.pack(">q", timestamp) + struct.pack(">q", value)
    back = serde.deserialize("t", data)
    assert back == (value, timestamp) and type(back) is ValueAndTimestamp


@pytest.mark.parametrize("value", [True, 2**63, -(2**63) - 1, 1.5, "1"])
def test_value_and_timestamp_of_a_long_keeps_the_long_serdes_errors(value: Any) -> None:
    with pytest.raises(SerializationError, match="Long serde"):
        ValueAndTimestampSerde(Serdes.Long()).serialize("t", ValueAndTimestamp(value, 0))


def test_value_and_timestamp_of_a_long_refuses_a_wrong_width() -> None:
    serde = ValueAndTimestampSerde(Serdes.Long())
    with pytest.raises(DeserializationError):
        serde.deserialize("t", bytes(12))
    with pytest.raises(DeserializationError):
        serde.deserialize("t", bytes(4))
