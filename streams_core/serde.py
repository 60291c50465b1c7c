"""Serdes: conversions between values and the bytes stored in Kafka, byte-compatible with Java's.

A `Serde` serializes and deserializes in one object (the hot path calls `serialize` and
`deserialize` directly). `None` maps to `None` both ways, as Kafka's tombstones need.
A failure to deserialize raises `DeserializationError`; the runtime locates it at the record's
topic, partition and offset.
"""

from __future__ import annotations

import importlib
import json
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from streams_core.errors import ConfigError, DeserializationError, SerializationError

T = TypeVar("T")

__all__ = ["Serde", "Serdes", "resolve_serde"]


class Serde(Generic[T]):
    """Turns values of type T into bytes and back; subclasses override both methods."""

    name = "serde"

    exact_type: type | None = None
    """The type whose values, of exactly that type, come back from `deserialize(serialize(v))`
    equal and of the same type (None: no such promise). A store may keep such values unserialized
    for a while (docs/state.md, "The write buffer")."""

    exact_pair: tuple[type, type, type] | None = None
    """(tuple type, first item's type, second item's type) of the pairs that come back unchanged,
    as `exact_type` (a table store's `ValueAndTimestamp` serde has one)."""

    def serialize(self, topic: str | None, data: T | None) -> bytes | None:
        raise NotImplementedError

    def deserialize(self, topic: str | None, data: bytes | None) -> T | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Serdes.{self.name}()"


class _BytesSerde(Serde[bytes]):
    name = "Bytes"
    exact_type = bytes

    def serialize(self, topic: str | None, data: bytes | None) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bytes):
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationError(f"Bytes serde expects bytes, got {type(data).__name__}", topic=topic)

    def deserialize(self, topic: str | None, data: bytes | None) -> bytes | None:
        return data


class _StringSerde(Serde[str]):
    name = "String"
    exact_type = str

    def serialize(self, topic: str | None, data: str | None) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            raise SerializationError(f"String serde expects str, got {type(data).__name__}", topic=topic)
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SerializationError(
                f"String serde cannot encode to UTF-8: {exc.reason} at index {exc.start}", topic=topic
            ) from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DeserializationError(f"invalid UTF-8: {exc.reason} at byte {exc.start}") from exc


class _FixedWidthSerde(Serde[Any]):
    """A number in a fixed-width big-endian layout, as Java's serializers write it."""

    def __init__(self, name: str, fmt: str, kinds: tuple[type, ...]) -> None:
        self.name = name
        self._struct = struct.Struct(fmt)
        self._kinds = kinds
        self.exact_type = kinds[0]  # an int through Double comes back a float

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bool) or not isinstance(data, self._kinds):
            raise SerializationError(
                f"{self.name} serde expects {'/'.join(k.__name__ for k in self._kinds)}, "
                f"got {type(data).__name__}",
                topic=topic,
            )
        try:
            return self._struct.pack(data)
        except struct.error as exc:
            raise SerializationError(f"{self.name} serde cannot encode {data!r}: {exc}", topic=topic) from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise DeserializationError(
                f"{self.name} serde expects {self._struct.size} bytes, got {len(data)}"
            )
        return self._struct.unpack(data)[0]


class _JsonSerde(Serde[Any]):
    name = "Json"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return text.encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"Json serde cannot encode: {exc}", topic=topic) from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise DeserializationError(f"invalid JSON: {exc}") from exc


class _FunctionSerde(Serde[T]):
    def __init__(
        self,
        serializer: Callable[[T], bytes],
        deserializer: Callable[[bytes], T],
        name: str,
    ) -> None:
        self._serializer = serializer
        self._deserializer = deserializer
        self.name = name

    def serialize(self, topic: str | None, data: T | None) -> bytes | None:
        if data is None:
            return None
        try:
            out = self._serializer(data)
        except Exception as exc:
            raise SerializationError(f"{self.name} serializer failed: {exc}", topic=topic) from exc
        if isinstance(out, bytes):
            return out
        if isinstance(out, (bytearray, memoryview)):
            return bytes(out)
        raise SerializationError(
            f"{self.name} serializer must return bytes, returned {type(out).__name__}", topic=topic
        )

    def deserialize(self, topic: str | None, data: bytes | None) -> T | None:
        if data is None:
            return None
        try:
            return self._deserializer(data)
        except Exception as exc:
            raise DeserializationError(f"{self.name} deserializer failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"Serdes.from_functions(name={self.name!r})"


_BYTES = _BytesSerde()
_STRING = _StringSerde()
_INTEGER = _FixedWidthSerde("Integer", ">i", (int,))
_LONG = _FixedWidthSerde("Long", ">q", (int,))
_DOUBLE = _FixedWidthSerde("Double", ">d", (float, int))
_JSON = _JsonSerde()


class Serdes:
    """Factories of the built-in serdes, named as Java's `Serdes`."""

    @staticmethod
    def Bytes() -> Serde[bytes]:
        return _BYTES

    ByteArray = Bytes

    @staticmethod
    def String() -> Serde[str]:
        return _STRING

    @staticmethod
    def Integer() -> Serde[int]:
        return _INTEGER

    @staticmethod
    def Long() -> Serde[int]:
        return _LONG

    @staticmethod
    def Double() -> Serde[float]:
        return _DOUBLE

    @staticmethod
    def Json() -> Serde[Any]:
        return _JSON

    @staticmethod
    def from_functions(
        serializer: Callable[[T], bytes], deserializer: Callable[[bytes], T], name: str = "Custom"
    ) -> Serde[T]:
        """A serde from two plain functions; their exceptions become (de)serialization errors."""
        return _FunctionSerde(serializer, deserializer, name)


_SHORT_NAMES: dict[str, Serde[Any]] = {
    "bytes": _BYTES,
    "bytearray": _BYTES,
    "string": _STRING,
    "integer": _INTEGER,
    "int": _INTEGER,
    "long": _LONG,
    "double": _DOUBLE,
    "json": _JSON,
}


def resolve_serde(value: object, key: str = "serde") -> Serde[Any]:
    """A Serde from a Serde instance, a Serde class or factory, or its name.

    Names are short ("string", "long"), dotted Python paths ("streams_core.serde.Serdes.String"),
    or Java class names ("org.apache.kafka.common.serialization.Serdes$StringSerde").
    `key` names the config key in the error.
    """
    if isinstance(value, Serde):
        return value
    if isinstance(value, str):
        text = value.strip()
        short = text.rsplit("$", 1)[-1].removesuffix("Serde") if "$" in text else text
        found = _SHORT_NAMES.get(short.lower())
        if found is not None:
            return found
        obj = _import_dotted(text, key)
        return resolve_serde(obj, key)
    if callable(value):
        try:
            produced = value()
        except TypeError as exc:
            raise ConfigError(key, f"cannot create a serde from {value!r}: {exc}") from exc
        if isinstance(produced, Serde):
            return produced
        raise ConfigError(key, f"{value!r} did not produce a Serde (got {type(produced).__name__})")
    raise ConfigError(
        key,
        f"expected a Serde, a Serde factory or a name such as 'string' or "
        f"'streams_core.serde.Serdes.Long', got {value!r}",
    )


def _import_dotted(path: str, key: str) -> object:
    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:split]))
        except (ImportError, ValueError, TypeError):
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        return obj
    raise ConfigError(
        key,
        f"cannot resolve serde {path!r}: use a Serde instance, a short name "
        f"({', '.join(sorted(_SHORT_NAMES))}) or an importable dotted path",
    )
