"""Discovery (KIP-67): which instances exist, which host a store, and which one owns a key.

Answers come from the metadata every instance receives with its assignment, so any instance
can answer them. While a rebalance has reset that metadata the answer is 503, not a list that
looks empty.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request

from api.deps import Forwarding, KeyText, StoreName, Streams, describe_store
from api.errors import NotAvailableError, error_responses
from api.forwarding import Forwarder
from api.instance import StreamsInstance
from api.schemas import HostInfoBody, HostStoreInfo, KeyOwner, StoreCopy, StoreLag, TopicPartitionBody
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
async def instance_for_key(
    request: Request, streams: Streams, forwarder: Forwarding, store: StoreName, key: KeyText
) -> KeyOwner:
    """The instance whose copy of `store` holds `key` (if the key exists), with its partition, standbys and
    every copy's lag (asked of each copy's instance; null when it does not answer)."""
    info = describe_store(streams, store)
    meta = streams.query_metadata_for_key(store, info.parse_key(key), info.keys.serde)
    if meta.partition < 0 or meta.active_host == HostInfo.UNAVAILABLE:
        raise NotAvailableError("metadata not available", store=store, state=streams.state.name)
    owner = next((m for m in streams.all_metadata() if m.host_info == meta.active_host), None)
    hosts = [meta.active_host, *sorted(meta.standby_hosts - {meta.active_host})]
    lags = await asyncio.gather(*(_lag_at(request, streams, forwarder, host, store, meta.partition) for host in hosts))
    return KeyOwner(
        host=meta.active_host.host,
        port=meta.active_host.port,
        store_names=sorted(owner.state_store_names) if owner else [store],
        partition=meta.partition,
        standby_hosts=[HostInfoBody(host=h.host, port=h.port) for h in sorted(meta.standby_hosts)],
        copies=[
            StoreCopy(host=host.host, port=host.port, active=host == meta.active_host, lag=lag)
            for host, lag in zip(hosts, lags, strict=True)
        ],
    )


async def _lag_at(
    request: Request, streams: StreamsInstance, forwarder: Forwarder, host: HostInfo, store: str, partition: int
) -> int | None:
    """The lag of `host`'s copy of the partition: read here, or asked of `host`; None if unknown."""
    if host == forwarder.this_host:
        lags = await _local_lags(streams, store)
    else:
        try:
            answer = await forwarder.get(host, request, {"store": store}, path="/state/lags")
        except NotAvailableError:
            return None
        if answer.status_code != 200:
            return None
        lags = [StoreLag.model_validate(item) for item in answer.json()]
    return next((lag.offset_lag for lag in lags if lag.partition == partition), None)


async def _local_lags(streams: StreamsInstance, store: str | None) -> list[StoreLag]:
    lags = await streams.all_local_store_partition_lags()
    return [
        StoreLag(
            store=name,
            partition=partition,
            current_offset_position=lag.current_offset_position,
            end_offset_position=lag.end_offset_position,
            offset_lag=lag.offset_lag,
        )
        for name, partitions in sorted(lags.items())
        if store is None or name == store
        for partition, lag in sorted(partitions.items())
    ]


@router.get("/lags", response_model=list[StoreLag], responses=error_responses(503, served_by=True))
async def local_lags(
    streams: Streams, store: Annotated[str | None, Query(description="Only the copies of this store.")] = None
) -> list[StoreLag]:
    """This instance's copies (active and standby) of every store partition, with their lags (KIP-535)."""
    return await _local_lags(streams, store)
