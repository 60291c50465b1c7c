"""The JSON bodies of the REST layer, with camelCase field names as in Confluent's examples.

Models are named by role: discovery answers (`HostStoreInfo`, `KeyOwner`), state answers
(`KeyValueBean`, `WindowedValue`), the topology (`TopologyBody`), probes (`HealthStatus`) and
`ErrorBody` for every error.
Keys and values are JSON renderings of the stored objects (see `api/keys.py`), so their
schemas are left open.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from api.keys import render

__all__ = [
    "DegradedThread",
    "ErrorBody",
    "HealthStatus",
    "HostInfoBody",
    "HostStoreInfo",
    "KeyOwner",
    "KeyValueBean",
    "StoreBody",
    "StoreCopy",
    "StoreLag",
    "SubtopologyBody",
    "TopicPartitionBody",
    "TopologyBody",
    "TopologyNode",
    "WindowedValue",
    "key_value_body",
]


class CamelModel(BaseModel):
    """Base of the bodies: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)


class TopicPartitionBody(CamelModel):
    """One partition of a topic."""

    topic: str
    partition: int


class HostInfoBody(CamelModel):
    """The `application.server` endpoint of an instance."""

    host: str
    port: int


class HostStoreInfo(CamelModel):
    """One instance of the application: where it answers and what it hosts (KIP-67 StreamsMetadata)."""

    host: str
    port: int
    store_names: list[str] = Field(description="Stores with an active copy on this instance.")
    topic_partitions: list[TopicPartitionBody] = Field(description="Source partitions of its active tasks.")
    standby_store_names: list[str] = Field(description="Stores with a standby copy on this instance.")


class StoreCopy(CamelModel):
    """One copy of a key's partition: where it is, whether it is the active one, and how far behind."""

    host: str
    port: int
    active: bool
    lag: int | None = Field(description="Changelog records behind (0 for a running active copy); null when unknown.")


class KeyOwner(CamelModel):
    """The instance whose store holds a key (whether or not the key exists), its standbys, and every copy's lag."""

    host: str
    port: int
    store_names: list[str]
    partition: int
    standby_hosts: list[HostInfoBody]
    copies: list[StoreCopy]


class StoreLag(CamelModel):
    """A local copy of one partition of a store and its lag behind the changelog (KIP-535 LagInfo)."""

    store: str
    partition: int
    current_offset_position: int
    end_offset_position: int
    offset_lag: int


class KeyValueBean(CamelModel):
    """A key and its value, both rendered as JSON."""

    key: Any = Field(description="The key as JSON (a windowed key is {key, windowStart, windowEnd}).")
    value: Any = Field(description="The stored value as JSON (bytes as UTF-8 text, or base64 when not UTF-8).")


def key_value_body(key: Any, value: Any) -> dict[str, Any]:
    """The JSON of a `KeyValueBean` for a stored key and value."""
    return {"key": render(key), "value": render(value)}


class WindowedValue(CamelModel):
    """The value of a key in one time window `[windowStart, windowEnd)`, in epoch milliseconds."""

    key: Any
    window_start: int
    window_end: int
    value: Any


class TopologyNode(CamelModel):
    """One node of a sub-topology, as `Topology.describe()` gives it."""

    name: str
    kind: Literal["source", "processor", "sink"]
    topics: list[str] = Field(
        description="A source's topics, a sink's topic (none for a sink with a topic extractor); internal topics without the application id."
    )
    topic_pattern: str | None = Field(description="The pattern of a source subscribed by pattern.")
    stores: list[str] = Field(description="The state stores connected to a processor.")
    predecessors: list[str]
    successors: list[str]


class SubtopologyBody(CamelModel):
    """A sub-topology: its id (the first part of its task ids) and its nodes in Kafka Streams' print order."""

    id: int
    global_store: bool = Field(description="Feeds a global store (and generates no tasks).")
    nodes: list[TopologyNode]


class StoreBody(CamelModel):
    """A state store of the topology and its kind (which query routes serve it)."""

    name: str
    kind: Literal["key-value", "window", "session"]


class TopologyBody(CamelModel):
    """The application's topology: sub-topologies, nodes, links and stores, and the text of `describe()`."""

    application_id: str
    subtopologies: list[SubtopologyBody]
    stores: list[StoreBody]
    description: str = Field(description="`Topology.describe()` in Kafka Streams' text form.")


class DegradedThread(CamelModel):
    """A stream thread whose worker does not answer its query channel."""

    thread: str = Field(description="The stream thread's name.")
    unanswered_ms: int = Field(description="How long its oldest query has waited, in milliseconds.")


class HealthStatus(CamelModel):
    """The answer of the liveness and readiness probes."""

    status: str = Field(description="UP or DOWN.")
    state: str = Field(description="The KafkaStreams client state (CREATED, REBALANCING, RUNNING, ...).")
    degraded_threads: list[DegradedThread] = Field(
        default_factory=list,
        description="Stream threads whose worker process has left a query unanswered for longer than the query deadline "
        "(stalled, paused, overloaded): their tasks' queries answer 503 meanwhile; the others answer as usual.",
    )


class ErrorBody(BaseModel):
    """Every error: a short `error` and details that depend on it (store, key, reason, instance...)."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(description="What went wrong, e.g. 'unknown state store' or 'key not found'.")
