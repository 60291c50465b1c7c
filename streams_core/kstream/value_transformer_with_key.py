"""ValueTransformerWithKey: what `KTable.transform_values` runs on each value (Kafka Streams' interface).

`transform(key, value)` returns the new value from the read-only key and the value, which is None
for a delete (the transformer decides what a delete becomes). `init(context)` gets a context whose
`forward` is refused (the framework forwards the returned value under the unchanged key); the
context reaches the stores connected to the operator. One transformer per task; another one per
reader of a non-materialised result (a join looking values up), as in Kafka Streams.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

__all__ = ["ValueTransformerWithKey", "ValueTransformerWithKeySupplier"]

K = TypeVar("K")
V = TypeVar("V")
VR = TypeVar("VR")


class ValueTransformerWithKey(Generic[K, V, VR]):
    """Base class: override `transform`, and `init` or `close` when needed."""

    def init(self, context: Any) -> None:
        """Called once before the first value; keep the context, fetch stores."""

    def transform(self, read_only_key: K, value: V | None) -> VR | None:
        """The new value of `read_only_key` (None: a delete) from `value` (None: a delete)."""
        raise NotImplementedError(f"{type(self).__name__} must implement transform(key, value)")

    def close(self) -> None:
        """Called once when the task closes."""


class ValueTransformerWithKeySupplier(Protocol[K, V, VR]):
    """Makes a new transformer per call; may also have `stores()` (a ConnectedStoreProvider)."""

    def get(self) -> ValueTransformerWithKey[K, V, VR]: ...
