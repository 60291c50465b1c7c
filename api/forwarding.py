"""Forwarding queries to the instance that owns the data, one hop at most.

A key lives on the instance that owns its partition (KIP-67). `route_key` decides, from the
discovery metadata, whether this instance answers or which instance to ask; the `Forwarder`
asks it over HTTP with timeouts. Every forwarded request carries `X-Streams-Forwarded-By`,
and an instance that receives one answers locally or with 503, never forwarding again: during
a rebalance two instances may disagree on the owner, and one hop cannot loop. Every state
answer names the instance that produced it in `X-Served-By`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import Request, Response

from api.errors import NotAvailableError
from api.instance import StreamsInstance
from streams_core import HostInfo, Serde

__all__ = ["HOP_HEADER", "SERVED_BY_HEADER", "Forwarder", "KeyRoute", "instance_name", "route_key"]

log = logging.getLogger(__name__)

HOP_HEADER = "X-Streams-Forwarded-By"
SERVED_BY_HEADER = "X-Served-By"
_RELAYED_HEADERS = ("content-type", "retry-after", SERVED_BY_HEADER.lower())


@dataclass(frozen=True, slots=True)
class KeyRoute:
    """Who answers a key query: this instance (`host` None) reading `partition`, or `host`."""

    host: HostInfo | None
    partition: int | None = None
    stale: bool = False


def route_key(
    streams: StreamsInstance,
    store: str,
    key: Any,
    key_serde: Serde[Any],
    *,
    this_host: HostInfo | None,
    stale: bool,
    forwarded: bool,
) -> KeyRoute:
    """Answer locally if this instance is the key's active host (or, with `stale`, a standby).

    Otherwise the active host answers (a standby when the active is unknown and `stale`).
    Without `application.server` there is no discovery: every answer is local.
    NotAvailableError (503) while the owner is unknown, or when a forwarded request reaches an
    instance that is not the owner.
    """
    if this_host is None:
        return KeyRoute(None, None, stale)
    meta = streams.query_metadata_for_key(store, key, key_serde)
    if meta.partition < 0 and meta.active_host == this_host:  # a global store: every instance has all of it
        return KeyRoute(None, None, stale)
    if meta.partition < 0:
        raise NotAvailableError("metadata not available", store=store, reason="rebalancing or not yet assigned")
    if meta.active_host == this_host:
        return KeyRoute(None, meta.partition, stale)
    if stale and this_host in meta.standby_hosts:
        return KeyRoute(None, meta.partition, True)
    if forwarded:
        raise NotAvailableError(
            "not the owner", store=store, partition=meta.partition, reason="the owner changed: retry at the origin"
        )
    if meta.active_host != HostInfo.UNAVAILABLE:
        return KeyRoute(meta.active_host, meta.partition, stale)
    if stale and meta.standby_hosts:
        return KeyRoute(min(meta.standby_hosts), meta.partition, True)
    raise NotAvailableError("no active host", store=store, partition=meta.partition)


def instance_name(this_host: HostInfo | None) -> str:
    """How an instance names itself in `X-Served-By`: its application.server, or `local`."""
    return str(this_host) if this_host else "local"


def _raw_path(request: Request) -> bytes:
    raw = request.scope.get("raw_path")
    return bytes(raw) if raw else request.url.path.encode("utf-8")


class Forwarder:
    """Sends a query on to another instance with this instance's hop header and timeouts."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        this_host: HostInfo | None,
        scheme: str = "http",
        on_forward: Callable[[str, str], None] | None = None,
    ) -> None:
        self.client = client
        self._on_forward = on_forward or (lambda route, instance: None)
        """Told (route template, instance) of every query sent on, for the forwards metric."""
        self.this_host = this_host
        self.scheme = scheme
        self._hop = {HOP_HEADER: str(this_host) if this_host else "unknown"}

    @property
    def served_by(self) -> str:
        """The `X-Served-By` of answers produced here."""
        return instance_name(self.this_host)

    async def get(self, host: HostInfo, request: Request, params: Mapping[str, str]) -> httpx.Response:
        """GET the same path on `host`; NotAvailableError (503) when it cannot be reached in time."""
        url = httpx.URL(scheme=self.scheme, host=host.host, port=host.port, raw_path=_raw_path(request))
        self._on_forward(getattr(request.scope.get("route"), "path", request.url.path), str(host))
        try:
            return await self.client.get(url, params=dict(params), headers=self._hop)
        except httpx.HTTPError as exc:
            log.info("forwarding %s to %s failed: %r", request.url.path, host, exc)
            raise NotAvailableError("instance unreachable", instance=str(host), reason=type(exc).__name__) from None

    async def relay(self, host: HostInfo, request: Request) -> Response:
        """The owner's answer to this request, status and body as they are.

        A server error of the owner other than 503 becomes a 503 here (the owner is not
        answering properly now, so the client should retry).
        """
        answer = await self.get(host, request, request.query_params)
        if answer.status_code >= 500 and answer.status_code != 503:
            raise NotAvailableError("instance failed", instance=str(host), status=answer.status_code)
        headers = {name: value for name, value in answer.headers.items() if name in _RELAYED_HEADERS}
        headers.setdefault(SERVED_BY_HEADER.lower(), str(host))
        return Response(answer.content, status_code=answer.status_code, headers=headers)

    async def gather_json(self, hosts: Sequence[HostInfo], request: Request, params: Mapping[str, str]) -> list[Any]:
        """The JSON answers of every host to this path, in the order of `hosts`: all or nothing.

        NotAvailableError (503) if any host is unreachable or does not answer 200.
        """
        answers = await asyncio.gather(*(self.get(host, request, params) for host in hosts), return_exceptions=True)
        bodies = []
        for host, answer in zip(hosts, answers, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            if answer.status_code != 200:
                raise NotAvailableError("instance not queryable", instance=str(host), status=answer.status_code)
            try:
                bodies.append(answer.json())
            except ValueError:
                raise NotAvailableError("instance answered no JSON", instance=str(host)) from None
        return bodies
