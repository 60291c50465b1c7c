"""Keys in paths and stored objects in bodies: the REST side of a store's serdes.

A path segment becomes a typed key by the store's key serde:

| key serde         | path text  | typed key                      | 400 when            |
|-------------------|------------|--------------------------------|---------------------|
| String            | `hello`    | `"hello"`                      | never               |
| Long, Integer     | `-42`      | `-42`                          | not an integer, out of range |
| Double            | `2.5`      | `2.5` (`NaN`, `Infinity` too)  | not a number        |
| Bytes             | `abc`      | `b"abc"` (the text's UTF-8)    | never               |
| Json              | `{"a":1}`  | `{"a": 1}`                     | not JSON            |
| other (custom)    | `text`     | the text, if the serde takes it | the serde rejects it |

Stored keys and values are rendered as JSON: bytes as UTF-8 text (base64 when not UTF-8),
windowed keys as `{key, windowStart, windowEnd}`, non-finite floats as the strings `NaN`,
`Infinity`, `-Infinity`. `KeyCodec.sort_key` maps a rendered key back to its serialized bytes,
the order stores use, so answers gathered from several instances merge in store order.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from streams_core import Serde, StreamsError

__all__ = ["KeyCodec", "render"]

_INTEGER = re.compile(r"-?[0-9]+")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _integer(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise ValueError("not an integer")
    return int(text)


def _double(text: str) -> float:
    if text in _NON_FINITE:
        return _NON_FINITE[text]
    if text != text.strip() or "_" in text or text.lower().lstrip("+-") in {"nan", "inf", "infinity"}:
        raise ValueError("not a number")
    return float(text)


def _json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_PARSERS: dict[str, Callable[[str], Any]] = {
    "String": str,
    "Long": _integer,
    "Integer": _integer,
    "Double": _double,
    "Bytes": lambda text: text.encode("utf-8"),
    "Json": _json,
}


def _unwrap(serde: Serde[Any]) -> Serde[Any]:
    """The serde a DSL placeholder stands for (an inferred serde resolves to its target)."""
    try:
        target = getattr(serde, "target", serde)
    except StreamsError:
        return serde
    return target if isinstance(target, Serde) else serde


@dataclasses.dataclass(frozen=True, slots=True)
class KeyCodec:
    """Parses path keys for one key serde, and orders rendered keys as the store does."""

    serde: Serde[Any]
    kind: str

    @classmethod
    def for_serde(cls, serde: Serde[Any]) -> KeyCodec:
        kind = getattr(_unwrap(serde), "name", "")
        return cls(serde, kind if kind in _PARSERS else "custom")

    def parse(self, text: str) -> Any:
        """The typed key of a path segment; ValueError with the reason when the serde rejects it."""
        parser = _PARSERS.get(self.kind, str)
        try:
            key = parser(text)
        except ValueError as exc:
            raise ValueError(f"{self.kind} key: {exc}") from None
        try:
            self.serde.serialize(None, key)
        except Exception as exc:
            raise ValueError(f"{self.kind} key: {exc}") from None
        return key

    def sort_key(self, rendered: Any) -> bytes:
        """The serialized bytes of a rendered key (falls back to its JSON text if it does not round-trip)."""
        try:
            if self.kind == "Bytes":
                return str(rendered).encode("utf-8")
            typed = _NON_FINITE.get(rendered, rendered) if self.kind == "Double" else rendered
            data = self.serde.serialize(None, typed)
        except Exception:
            data = None
        if data is None:
            return json.dumps(rendered, sort_keys=True).encode("utf-8")
        return data


def render(obj: Any) -> Any:
    """A JSON-ready rendering of a stored key or value."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else ("NaN" if math.isnan(obj) else "Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii")
    window = getattr(obj, "window", None)
    if window is not None and hasattr(obj, "key"):
        return {"key": render(obj.key), "windowStart": window.start, "windowEnd": window.end}
    if isinstance(obj, Mapping):
        return {str(render(k)): render(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [render(item) for item in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {field.name: render(getattr(obj, field.name)) for field in dataclasses.fields(obj)}
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return render(dump(mode="json"))
    return str(obj)
