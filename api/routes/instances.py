"""Discovery (KIP-67): which instances exist, which host a store, and which one owns a key.

Answers come from the metadata every instance receives with its assignment, so any instance
can answer them. While a rebalance has reset that metadata the answer is 503, not a list that
looks empty.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import KeyText, StoreName, Streams, describe_store
from api.errors import NotAvailableError, error_responses
from api.instance import StreamsInstance
from api.schemas import HostInfoBody, HostStoreInfo, KeyOwner, TopicPartitionBody
from streams_core import HostInfo, State, StreamsMetadata

__all__ = ["router"]

router = APIRouter(prefix="/state", tags=["instances"])


def host_store_info(metadata: StreamsMetadata) -> HostStoreInfo:
    return HostStoreInfo(
        host=metadata.host,
        port=metadata.port,
        store_names=sorted(metadata.state_store_names),
        topic_partitions=[TopicPartitionBody(topic=t, partition=p) for t, p in sorted(metadata.topic_partitions)],
        standby_store_names=sorted(metadata.standby_state_store_names),
    )


def _require_metadata(streams: StreamsInstance, found: list[StreamsMetadata]) -> list[StreamsMetadata]:
    """The metadata, or 503 while the client is not running or a rebalance has cleared it."""
    state = streams.state
    if state not in (State.RUNNING, State.REBALANCING) or (state is State.REBALANCING and not found):
        raise NotAvailableError("metadata not available", state=state.name)
    return found


@router.get("/instances", response_model=list[HostStoreInfo], responses=error_responses(503, served_by=True))
async def all_instances(streams: Streams) -> list[HostStoreInfo]:
    """Every instance of the application with its stores and partitions."""
    return [host_store_info(m) for m in _require_metadata(streams, streams.all_metadata())]


@router.get(
    "/instances/{store}", response_model=list[HostStoreInfo], responses=error_responses(404, 503, served_by=True)
)
async def instances_for_store(streams: Streams, store: StoreName) -> list[HostStoreInfo]:
    """The instances that host an active or standby copy of `store`."""
    describe_store(streams, store)
    return [host_store_info(m) for m in _require_metadata(streams, streams.all_metadata_for_store(store))]


@router.get(
    "/instance/{store}/{key}", response_model=KeyOwner, responses=error_responses(400, 404, 503, served_by=True)
)
async def instance_for_key(streams: Streams, store: StoreName, key: KeyText) -> KeyOwner:
    """The instance whose copy of `store` holds `key` (if the key exists), with its partition and standbys."""
    info = describe_store(streams, store)
    meta = streams.query_metadata_for_key(store, info.parse_key(key), info.keys.serde)
    if meta.partition < 0 or meta.active_host == HostInfo.UNAVAILABLE:
        raise NotAvailableError("metadata not available", store=store, state=streams.state.name)
    owner = next((m for m in streams.all_metadata() if m.host_info == meta.active_host), None)
    return KeyOwner(
        host=meta.active_host.host,
        port=meta.active_host.port,
        store_names=sorted(owner.state_store_names) if owner else [store],
        partition=meta.partition,
        standby_hosts=[HostInfoBody(host=h.host, port=h.port) for h in sorted(meta.standby_hosts)],
    )
