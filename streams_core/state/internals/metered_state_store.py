"""MeteredStateStore: what the typed (serde) layers of every store kind share.

Serdes may be missing when the builder is made (`Stores.key_value_store_builder(supplier)`):
the task fills them from `default.key.serde` / `default.value.serde` with
`set_serdes_if_missing(key_serde, value_serde)` before `init`; failing that, `init` takes the
context's `key_serde` / `value_serde` attributes if it has them (`StoreContext` does), and
raises ProcessorStateError if a serde is still missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from streams_core.common.store import StateStore, StateStoreContext
from streams_core.errors import ProcessorStateError
from streams_core.serde import Serde
from streams_core.state.internals.not_open import NotOpen
from streams_core.state.internals.state_serdes import StateSerdes, timestamped_values
from streams_core.state.internals.store_metrics import StoreMetrics
from streams_core.state.internals.wrapped_state_store import WrappedStateStore
from streams_core.state.windowed import Windowed

S = TypeVar("S", bound=StateStore)
K = TypeVar("K")
V = TypeVar("V")

__all__ = ["MeteredStateStore"]


class MeteredStateStore(WrappedStateStore[S], Generic[S, K, V]):
    """Holds the serdes (bound at init) and the metrics of a typed store layer."""

    OPERATIONS: tuple[str, ...] = ()
    """Names of the methods timed when latency recording is on."""

    def __init__(
        self,
        wrapped: S,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        metrics_scope: str = "",
        *,
        record_latency: bool = False,
    ) -> None:
        super().__init__(wrapped)
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._serdes: StateSerdes[K, V] | NotOpen = NotOpen(wrapped.name)
        self._metrics = StoreMetrics(metrics_scope, wrapped.name)
        self._counts = self._metrics.counts
        if record_latency:
            self.set_record_latency(True)

    @property
    def key_serde(self) -> Serde[K] | None:
        return self._key_serde

    @property
    def value_serde(self) -> Serde[V] | None:
        return self._value_serde

    @property
    def timestamped_values(self) -> bool:
        """Whether the store below holds value-and-timestamp bytes (its changelog holds plain values):
        its value serde says so."""
        return timestamped_values(self._value_serde)

    @property
    def metrics(self) -> StoreMetrics:
        return self._metrics

    def set_record_latency(self, enabled: bool) -> None:
        """Turn per-operation latency recording on or off (off by default: it costs a timer per call)."""
        self._metrics.set_timed(self, self.OPERATIONS, enabled)

    def set_flush_listener(self, listener: Callable[[Any, V | None, V | None, int], None]) -> bool:
        """With caching enabled: call `listener(key, new, old, timestamp)` for each entry the cache
        writes through (on commit or eviction) and return True; False when the store has no cache.
        Keys are typed as the store's (`Windowed[K]` for window and session stores)."""
        layer: Any = self._wrapped
        while layer is not None and not hasattr(layer, "set_flush_listener"):
            layer = layer.wrapped() if hasattr(layer, "wrapped") else None
        if layer is None:
            return False
        serdes = self._serdes

        def typed(key: Any, new: bytes | None, old: bytes | None, timestamp: int) -> None:
            if isinstance(key, Windowed):
                typed_key: Any = Windowed(serdes.key_from(key.key), key.window)
            else:
                typed_key = serdes.key_from(key)
            listener(typed_key, serdes.value_from(new), serdes.value_from(old), timestamp)

        return bool(layer.set_flush_listener(typed))

    def set_serdes_if_missing(self, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None) -> None:
        """Fill in serdes not given at construction (the application defaults); call before init."""
        if self._key_serde is None:
            self._key_serde = key_serde
        if self._value_serde is None:
            self._value_serde = value_serde

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Bind the serdes to the changelog topic, then initialise the layers below."""
        self.set_serdes_if_missing(getattr(context, "key_serde", None), getattr(context, "value_serde", None))
        for what, serde in (("key", self._key_serde), ("value", self._value_serde)):
            if serde is None:
                raise ProcessorStateError(
                    f"store {self.name!r} has no {what} serde: give one to the store builder or set "
                    f"default.{what}.serde"
                )
        topic = f"{context.application_id}-{self.name}-changelog"
        self._serdes = StateSerdes(self.name, topic, self._key_serde, self._value_serde)  # type: ignore[arg-type]
        super().init(context, root)

    def flush(self) -> None:
        self._counts["flush"] += 1
        super().flush()

    def close(self) -> None:
        super().close()
        self._serdes = NotOpen(self.name)
