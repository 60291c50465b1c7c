"""Kafka Streams' `single.store.self.join` optimization (KIP-862), as a rewrite of the written topology.

Java's `InternalStreamsBuilder.rewriteSingleStoreSelfJoin`: a stream-stream join whose two sides
are the same node (one stream joined with itself, or two `stream()` calls of the same topics,
which share one source node) loses its other-side windowed node, its two join processors and the
other side's window store; its merge node becomes one `KStreamKStreamSelfJoin` below the this-side
windowed node, reading the this-side store (Java's `StreamStreamJoinNode.writeToTopology` with
`isSelfJoin`). Only inner joins are rewritten (docs/dsl.md says why).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder

__all__ = ["SelfJoinCandidate", "rewrite_single_store_self_joins"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SelfJoinCandidate:
    """The nodes and stores of an inner join of a node with itself (Java's StreamStreamJoinNode with one parent)."""

    this_windowed: str
    other_windowed: str
    this_join: str
    other_join: str
    merge: str
    this_store: str
    other_store: str
    self_join: Callable[[], Any]


def rewrite_single_store_self_joins(itb: InternalTopologyBuilder, candidates: list[SelfJoinCandidate]) -> None:
    """Make each candidate one processor, named as its merge node, over the this-side store."""
    for c in candidates:
        removed = (c.other_windowed, c.this_join, c.other_join)
        order = [name for name in itb.node_names if name not in removed]
        itb.remove_nodes((*removed, c.merge))
        itb.remove_state_store(c.other_store)
        itb.add_processor(c.merge, c.self_join, (c.this_windowed,))
        itb.connect_processor_and_state_stores(c.merge, (c.this_store,))
        itb.reorder(order)
        log.debug("self-join %s rewritten over the one store %s", c.merge, c.this_store)
