"""Gathered scans (`all`, `range`): one page of the entries of every partition of a store.

Each partition is asked of the instance the metadata names its active host, with `scope=local`
and `partitions` (its own), and the answers are merged in store (serialized key) order. The
metadata must name a host for every partition of the store (`StreamsInstance.store_partitions`),
and each host must have the active copy of every partition it is asked for: otherwise the
answer is 503, never a partial list. Under the streams protocol (KIP-1071) both happen while a
task moves: the broker's endpoint map lists the tasks members acknowledged, so a task revoked by
one member and not yet acknowledged by the next is on no host, and a member that revoked it
answers before the others hear of the new map. Under the classic protocol the assignor's map
names every partition while the group is RUNNING.
"""

from __future__ import annotations

import asyncio
import heapq
import re
from collections.abc import Callable
from typing import Any

from fastapi import Request, Response

from api.deps import StoreInfo
from api.errors import BadRequestError, NotAvailableError, PartitionNotFoundError
from api.forwarding import SERVED_BY_HEADER, Forwarder
from api.instance import StreamsInstance
from api.keys import render
from api.paging import NEXT_AFTER_HEADER, Page, cursor_header, read_page
from api.reads import read_scan
from streams_core import State
from streams_core.common.host_info import HostInfo
from streams_core.common.store import KeyValue
from streams_core.common.topic_partition import TopicPartition
from streams_core.query import RangeQuery
from streams_core.runtime.queries.store_host import Deadline

__all__ = ["PARTITIONS_PATTERN", "key_bytes", "scan"]

PARTITIONS_PATTERN = r"^[0-9]{1,9}(,[0-9]{1,9})*$"
"""The `partitions` parameter as openapi.yaml documents it: partition numbers joined by commas."""


def _render_entry(entry: KeyValue[Any, Any]) -> dict[str, Any]:
    return {"key": render(entry.key), "value": render(entry.value)}


async def scan(
    request: Request,
    streams: StreamsInstance,
    forwarder: Forwarder,
    store: StoreInfo,
    local_query: Callable[[Any], RangeQuery],
    deadline: Deadline,
    *,
    gather: bool,
    limit: int | None,
    after: str | None,
    partitions: str | None,
) -> Response:
    """One page of entries: this instance's active copies (`local_query(cursor)`, of `partitions` when
    named), or every partition's, each asked of the host the metadata names for it, merged in key
    order; the local read and the other instances' are asked at once, by one deadline."""
    to_bytes = key_bytes(store)
    cursor = None if after is None else store.parse_key(after)
    cursor_bytes = None if cursor is None else to_bytes(cursor)
    named = None if partitions is None else _named_partitions(streams, store, partitions)

    async def local(only: frozenset[int] | None) -> Page:
        entries = await read_scan(streams, store.name, store.is_global, local_query(cursor), to_bytes, deadline, only)
        return await read_page(entries, _render_entry, limit=limit, after=cursor_bytes, key_bytes=to_bytes)

    if not gather or forwarder.this_host is None or store.is_global:
        return _page_response(await local(named))
    if streams.state is not State.RUNNING:
        raise NotAvailableError("not queryable", store=store.name, state=streams.state.name)
    asked = _hosts_of_partitions(streams, store.name, named)
    hosts = sorted(asked)
    remote = [host for host in hosts if host != forwarder.this_host]
    params = [{**request.query_params, "scope": "local", "partitions": _partition_list(asked[host])} for host in remote]
    if forwarder.this_host in asked:
        answers, here = await asyncio.gather(
            forwarder.gather(remote, request, params, deadline), local(asked[forwarder.this_host])
        )
    else:
        answers, here = await forwarder.gather(remote, request, params, deadline), None
    pages = [
        Page(_json_list(host, answer.json()), NEXT_AFTER_HEADER.lower() in answer.headers)
        for host, answer in zip(remote, answers, strict=True)
    ]
    if here is not None:
        pages.append(here)
    merged = list(heapq.merge(*(p.entries for p in pages), key=lambda entry: store.keys.sort_key(entry["key"])))
    more = any(p.more for p in pages) or (limit is not None and len(merged) > limit)
    response = _page_response(Page(merged[:limit] if limit is not None else merged, more))
    response.headers[SERVED_BY_HEADER] = ", ".join(str(host) for host in hosts) or forwarder.served_by
    return response


def _named_partitions(streams: StreamsInstance, store: StoreInfo, text: str) -> frozenset[int]:
    """The partitions a `partitions` parameter names; 400 for a malformed list, 404 for a partition the
    store does not have (a global store has none)."""
    if re.fullmatch(PARTITIONS_PATTERN, text) is None:
        raise BadRequestError("invalid partitions", partitions=text, reason="expected partition numbers joined by commas")
    if store.is_global:
        raise PartitionNotFoundError(store.name, text)
    named = frozenset(int(p) for p in text.split(","))
    unknown = named - {tp.partition for tp in streams.store_partitions(store.name)}
    if unknown:
        raise PartitionNotFoundError(store.name, sorted(unknown))
    return named


def _hosts_of_partitions(
    streams: StreamsInstance, store_name: str, named: frozenset[int] | None
) -> dict[HostInfo, frozenset[int]]:
    """The hosts to ask, each with the store partitions the metadata names it the active host of (of
    `named` only, when given); each partition asked of one host.

    503 naming the partitions on no host: under the streams protocol the broker's endpoint map lists
    the tasks members acknowledged, so a task revoked by one member and not yet acknowledged by the
    next is on none. (The classic assignor's map names every partition while the group is RUNNING.)"""
    wanted = streams.store_partitions(store_name)
    if named is not None:
        wanted = frozenset(tp for tp in wanted if tp.partition in named)
    asked: dict[HostInfo, frozenset[int]] = {}
    covered: set[TopicPartition] = set()
    for metadata in sorted(streams.all_metadata_for_store(store_name), key=lambda m: m.host_info):
        mine = (metadata.topic_partitions & wanted) - covered
        if mine:
            covered |= mine
            asked[metadata.host_info] = frozenset(tp.partition for tp in mine)
    missing = sorted({tp.partition for tp in wanted - covered})
    if missing:
        raise NotAvailableError(
            "partitions on no instance", store=store_name, partitions=missing,
            reason="the active copies of these partitions are moving between instances",
        )  # fmt: skip
    return asked


def _partition_list(partitions: frozenset[int]) -> str:
    return ",".join(str(p) for p in sorted(partitions))


def _json_list(host: Any, body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, list):
        raise NotAvailableError("instance answered no list", instance=str(host))
    return body


def key_bytes(store: StoreInfo) -> Callable[[Any], bytes]:
    serde = store.keys.serde
    return lambda key: serde.serialize(None, key) or b""


def _page_response(page: Page) -> Response:
    response = Response(page.json(), media_type="application/json")
    if page.next_after is not None:
        response.headers[NEXT_AFTER_HEADER] = cursor_header(page.next_after)
    return response
