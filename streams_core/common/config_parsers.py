"""The value parsers of configuration keys, shared by StreamsConfig and the Kafka client properties.

Each parser takes the key and the value as given (a Python value, or a string from an
environment variable or a property file) and returns the parsed value or raises `ConfigError`
naming the key and what it accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams_core.errors import ConfigError

__all__ = ["boolean", "choice", "integer", "non_empty_string"]


def integer(minimum: int | None = None) -> Callable[[str, Any], int]:
    """An int (or a string or whole float of one), at least `minimum`; booleans are refused."""

    def parse(key: str, value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(key, f"expected an integer, got {value!r}") from None
        if isinstance(value, float) and value != number:
            raise ConfigError(key, f"expected an integer, got {value!r}")
        if minimum is not None and number < minimum:
            raise ConfigError(key, f"must be >= {minimum}, got {number}")
        return number

    return parse


def boolean(key: str, value: Any) -> bool:
    """A bool, or the string true or false in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(key, f"expected true or false, got {value!r}")


def choice(*choices: str, normalize: Callable[[str], str] = str.lower) -> Callable[[str, Any], str]:
    """One of `choices`, compared after `normalize` (lower case by default) of the stripped text."""

    def parse(key: str, value: Any) -> str:
        text = normalize(str(value).strip())
        if text not in choices:
            raise ConfigError(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return text

    return parse


def non_empty_string(key: str, value: Any) -> str:
    """A string with something besides white space, stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a non-empty string, got {value!r}")
    return value.strip()
