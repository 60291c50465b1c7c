"""StoreDescription: what a query layer (such as the REST API) needs to know of a topology's store.

Its kind (key-value, window or session), the serde its keys are written with, and the window
size of a window store, read from the store's builder in the topology.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.processor.topology import Topology

__all__ = ["StoreDescription", "StoreKind", "describe_store"]

StoreKind = Literal["key-value", "window", "session"]


@dataclass(frozen=True, slots=True)
class StoreDescription:
    """A store of the topology: name, kind, key serde and (window stores) window size in ms."""

    name: str
    kind: StoreKind
    key_serde: Serde[Any]
    window_size: int | None = None
    is_global: bool = False
    """A global store: every instance holds all of it."""


def _kind(supplier: Any) -> StoreKind:
    """Window suppliers have a window size, session suppliers a retention period, key-value ones neither."""
    if hasattr(supplier, "window_size"):
        return "window"
    if hasattr(supplier, "retention_period"):
        return "session"
    return "key-value"


def describe_store(topology: Topology, store_name: str, default_key_serde: Serde[Any]) -> StoreDescription:
    """The description of `store_name` from its builder; KeyError if the topology has no such builder."""
    try:
        builder = topology.internal_topology_builder.store_builder(store_name)
    except KeyError:
        builder = None
    supplier = getattr(builder, "supplier", None)
    kind = _kind(supplier)
    key_serde = getattr(builder, "key_serde", None) or default_key_serde
    window_size = getattr(supplier, "window_size", None) if kind == "window" else None
    is_global = store_name in topology.internal_topology_builder.global_state_store_names
    return StoreDescription(store_name, kind, key_serde, window_size, is_global)
