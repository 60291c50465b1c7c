"""ConnectedStoreProvider: a processor supplier that brings its own state stores (Kafka Streams' KIP-401).

A supplier with a `stores()` method returning store builders has them added to the topology and
connected to its processor by `Topology.add_processor`, `KStream.process` and
`KStream.process_values`, so the processor and its stores are declared in one place. A store
builder may be shared by several suppliers (it is added once and connected to each processor);
two different builders with one name are a `TopologyError`, as in Kafka Streams.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = ["ConnectedStoreProvider", "supplier_stores"]


@runtime_checkable
class ConnectedStoreProvider(Protocol):
    """Has `stores()`: the store builders its processors use (None or empty: none)."""

    def stores(self) -> Iterable[Any] | None: ...


def supplier_stores(supplier: object) -> tuple[Any, ...]:
    """The store builders `supplier.stores()` returns, or () when it has no `stores()` (a class or a
    plain factory); a class is not asked, since its `stores` would be an unbound method."""
    if isinstance(supplier, type):
        return ()
    stores = getattr(supplier, "stores", None)
    if not callable(stores):
        return ()
    builders = stores()
    return () if builders is None else tuple(builders)
