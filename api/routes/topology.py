"""`/topology`: the application's topology as JSON, for the dashboard and for tools.

The same facts as `Topology.describe()` (sub-topologies, nodes in Kafka Streams' print order,
their topics, stores and links) plus each store's kind, so a client can draw the graph and
knows which query routes serve which store. Every instance runs the same topology, so any
instance answers.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter

from api.deps import Streams
from api.schemas import StoreBody, SubtopologyBody, TopologyBody, TopologyNode
from streams_core.processor.topology_description import (
    NodeDescription,
    ProcessorDescription,
    SinkDescription,
    SourceDescription,
    SubtopologyDescription,
)
from streams_core.state.store_description import describe_store

__all__ = ["router"]

router = APIRouter(tags=["topology"])


def _node(node: NodeDescription) -> TopologyNode:
    topics: list[str] = []
    pattern = None
    stores: list[str] = []
    kind: Literal["source", "processor", "sink"]
    if isinstance(node, SourceDescription):
        kind = "source"
        topics = sorted(node.topics)
        pattern = node.topic_pattern.pattern if node.topic_pattern is not None else None
    elif isinstance(node, SinkDescription):
        kind = "sink"
        topics = [node.topic] if node.topic is not None else []
    else:
        kind = "processor"
        stores = sorted(node.stores) if isinstance(node, ProcessorDescription) else []
    return TopologyNode(
        name=node.name,
        kind=kind,
        topics=topics,
        topic_pattern=pattern,
        stores=stores,
        predecessors=[p.name for p in node.predecessors],
        successors=[s.name for s in node.successors],
    )


@router.get("/topology", response_model=TopologyBody)
async def topology(streams: Streams) -> TopologyBody:
    """The sub-topologies with their nodes and links, the stores with their kinds, and `describe()`'s text."""
    description = streams.topology.describe()
    subtopologies = [
        SubtopologyBody(
            id=sub.id,
            global_store=not isinstance(sub, SubtopologyDescription),  # a global store's description is its own type
            nodes=[_node(node) for node in sub.nodes],
        )
        for sub in description.subtopologies
    ]
    names = sorted({store for sub in subtopologies for node in sub.nodes for store in node.stores})
    default_key_serde = streams.config["default.key.serde"]
    stores = [StoreBody(name=name, kind=describe_store(streams.topology, name, default_key_serde).kind) for name in names]
    return TopologyBody(
        application_id=streams.application_id,
        subtopologies=subtopologies,
        stores=stores,
        description=str(description),
    )
