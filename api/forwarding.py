"""Forwarding queries to the instance that owns the data, one hop at most.

A key lives on the instance that owns its partition (KIP-67). `route_key` decides, from the
discovery metadata, whether this instance answers or which instance to ask; the `Forwarder`
asks it over HTTP with timeouts. Every forwarded request carries `X-Streams-Forwarded-By`,
and an instance that receives one answers locally or with 503, never forwarding again: during
a rebalance two instances may disagree on the owner, and one hop cannot loop. Every state
answer names the instance that produced it in `X-Served-By`. Only hosts of the group's
metadata are ever asked, at this instance's route path rebuilt from the parsed parameters:
nothing in a request (headers, path, query) chooses where it goes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from fastapi import Request, Response

from api.errors import BadRequestError, NotAvailableError
from api.instance import StreamsInstance
from streams_core import HostInfo, InvalidStateStoreError, Serde
from streams_core.runtime.queries.store_host import Deadline

__all__ = [
    "HOP_HEADER",
    "SERVED_BY_HEADER",
    "Forwarder",
    "KeyRoute",
    "answer_key",
    "fill_path",
    "forwarded_path",
    "instance_name",
    "peer_transport",
    "route_key",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

HOP_HEADER = "X-Streams-Forwarded-By"
SERVED_BY_HEADER = "X-Served-By"
_RELAYED_HEADERS = ("content-type", "retry-after", SERVED_BY_HEADER.lower(), "x-streams-position", "x-next-after")


@dataclass(frozen=True, slots=True)
class KeyRoute:
    """Who may answer a key query, in the order to ask: this instance first when `local` (reading
    `partition`), then `hosts`. A plain read has one candidate, the active copy; a stale read
    has every copy, the active one first, so that a dead or lagging host costs one failed try."""

    local: bool
    partition: int | None = None
    stale: bool = False
    hosts: tuple[HostInfo, ...] = ()


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
    """The candidates for a key, from the discovery metadata (the last assignment's during a rebalance).

    Without `application.server` there is no discovery: every answer is local. A forwarded
    request is answered here or not at all (one hop). NotAvailableError (503) while the owner
    is unknown, or when a forwarded request reaches an instance with no copy to read.
    """
    if this_host is None:
        return KeyRoute(True, None, stale)
    meta = streams.query_metadata_for_key(store, key, key_serde)
    if meta.partition < 0 and meta.active_host == this_host:  # a global store: every instance has all of it
        return KeyRoute(True, None, stale)
    if meta.partition < 0:
        raise NotAvailableError("metadata not available", store=store, reason="rebalancing or not yet assigned")
    active = () if meta.active_host == HostInfo.UNAVAILABLE else (meta.active_host,)
    copies = (*active, *sorted(meta.standby_hosts - set(active))) if stale else active
    local = this_host in copies
    remote = () if forwarded else tuple(host for host in copies if host != this_host)
    if not local and not remote:
        if forwarded:
            raise NotAvailableError(
                "not the owner", store=store, partition=meta.partition, reason="the owner changed: retry at the origin"
            )
        raise NotAvailableError("no active host", store=store, partition=meta.partition)
    return KeyRoute(local, meta.partition, stale, remote)


async def answer_key(
    route: KeyRoute,
    forwarder: Forwarder,
    request: Request,
    read: Callable[[], Awaitable[T]],
    wait_s: float = 0.0,
    deadline: Deadline | None = None,
) -> T | Response:
    """The first answer of the route's candidates: `read()` here, else relayed from the hosts in turn.

    A candidate that cannot answer now (not queryable, unreachable, 503, too slow) passes the
    query on to the next; a 404 is an answer. The last candidate's failure is raised (503).
    `wait_s` is how long a candidate may wait before it answers (a `position` bound's timeout);
    relays end by `deadline` (`read()` keeps it itself).
    """
    failure: BaseException | None = None
    if route.local:
        try:
            return await read()
        except (InvalidStateStoreError, NotAvailableError) as exc:
            if not route.hosts:
                raise
            failure = exc
    for index, host in enumerate(route.hosts):
        last = index == len(route.hosts) - 1
        try:
            answer = await forwarder.relay(host, request, wait_s, deadline)
        except NotAvailableError as exc:
            if last:
                raise
            failure = exc
            continue
        if answer.status_code != 503 or last:
            return answer
    assert failure is not None
    raise failure


def instance_name(this_host: HostInfo | None) -> str:
    """How an instance names itself in `X-Served-By`: its application.server, or `local`."""
    return str(this_host) if this_host else "local"


def _segment(value: str) -> str:
    """One path parameter as a URL segment that every hop reads back unchanged (dot segments too)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def fill_path(template: str, params: Mapping[str, Any]) -> str:
    """A route template (`/state/keyvalue/{store}/{key}`) filled with URL segments of `params`."""
    return template.format_map({name: _segment(str(value)) for name, value in params.items()})


def forwarded_path(request: Request) -> str:
    """The path to ask another instance: the matched route's template filled with its parameters.

    Not the raw request path: httpx would resolve `..` segments and refuse a `#`, and the
    owner must read the same route and parameters as this instance did.
    """
    route = request.scope.get("route")
    template = getattr(route, "path_format", None)
    if template is None:
        return quote(request.url.path, safe="/")
    return fill_path(str(template), request.path_params)


def peer_transport(verify: ssl.SSLContext | bool = True) -> httpx.AsyncHTTPTransport:
    """httpx's own transport for forwarded queries: keep-alive connections to the other instances,
    at most 256 at once (further forwards wait up to the pool timeout), 64 kept idle for up to 4 s
    (under uvicorn's 5 s keep-alive, so a peer rarely closes a connection this side still keeps).

    `verify` is the SSL context trusting the instances' CA when `ApiSettings.scheme` is https.
    """
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=4.0)
    return httpx.AsyncHTTPTransport(verify=verify, limits=limits)


class Forwarder:
    """Sends a query on to another instance with this instance's hop header and timeouts.

    Requests go straight to the transport (`peer_transport()`, or a test's): httpx's client layers
    (auth, redirects, cookies, hooks), none of which forwarding uses, would cost CPU that the
    stream threads on the same cores would have used.
    """

    def __repr__(self) -> str:
        return f"Forwarder({self.served_by}, {self.scheme})"

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        timeout: httpx.Timeout,
        this_host: HostInfo | None,
        scheme: str = "http",
        on_forward: Callable[[str, str], None] | None = None,
        authorization: str | None = None,
    ) -> None:
        self._transport = transport
        self._timeout = timeout
        self._on_forward = on_forward or (lambda route, instance: None)
        """Told (route template, instance) of every query sent on, for the forwards metric."""
        self.this_host = this_host
        self.scheme = scheme
        self._hop = {HOP_HEADER: str(this_host) if this_host else "unknown"}
        if authorization is not None:  # this instance's own credentials (api/auth.py): the peers require them too
            self._hop["Authorization"] = authorization

    @property
    def served_by(self) -> str:
        """The `X-Served-By` of answers produced here."""
        return instance_name(self.this_host)

    async def fetch(self, url: httpx.URL, params: Mapping[str, str] | None = None, wait_s: float = 0.0) -> httpx.Response:
        """GET `url` with the hop header, its body read; httpx.HTTPError when it fails or times out.

        `wait_s` extends the read timeout by what the other instance is allowed to wait before answering.
        """
        timeout = self._timeout
        if wait_s > 0 and timeout.read is not None:
            timeout = httpx.Timeout(timeout.read + wait_s, connect=timeout.connect, pool=timeout.pool)
        request = httpx.Request("GET", url, params=params, headers=self._hop, extensions={"timeout": timeout.as_dict()})
        response = await self._transport.handle_async_request(request)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def get(
        self,
        host: HostInfo,
        request: Request,
        params: Mapping[str, str],
        path: str | None = None,
        wait_s: float = 0.0,
        deadline: Deadline | None = None,
    ) -> httpx.Response:
        """GET the same path (or `path`) on `host`; NotAvailableError (503) when it cannot be reached
        in time (its timeouts, or the query's `deadline`)."""
        route = getattr(request.scope.get("route"), "path", request.url.path)
        return await self._get(host, forwarded_path(request) if path is None else path, route, params, wait_s, deadline)

    async def _get(
        self,
        host: HostInfo,
        path: str,
        route: str,
        params: Mapping[str, str],
        wait_s: float = 0.0,
        deadline: Deadline | None = None,
    ) -> httpx.Response:
        self._on_forward(route, str(host))
        try:
            url = httpx.URL(scheme=self.scheme, host=host.host, port=host.port, raw_path=path.encode("ascii"))
            if deadline is None:
                return await self.fetch(url, dict(params), wait_s)
            async with asyncio.timeout(deadline.remaining()):
                return await self.fetch(url, dict(params), wait_s)
        except httpx.InvalidURL as exc:
            raise BadRequestError("request cannot be forwarded", instance=str(host), reason=str(exc)) from None
        except httpx.HTTPError as exc:
            log.info("forwarding %s to %s failed: %r", path, host, exc)
            raise NotAvailableError("instance unreachable", instance=str(host), reason=type(exc).__name__) from None
        except TimeoutError:
            log.info("forwarding %s to %s: no answer by the query's deadline", path, host)
            raise NotAvailableError("instance did not answer in time", instance=str(host), reason="deadline") from None

    async def relay(self, host: HostInfo, request: Request, wait_s: float = 0.0, deadline: Deadline | None = None) -> Response:
        """The owner's answer to this request, status and body as they are (it may wait `wait_s` first).

        A server error of the owner other than 503 becomes a 503 here (the owner is not
        answering properly now, so the client should retry), and so does a 401 or 403: the
        owner refused this instance's credentials, not the client's.
        """
        return self._relayed(host, await self.get(host, request, request.query_params, None, wait_s, deadline))

    async def relay_path(self, host: HostInfo, path: str, route: str, deadline: Deadline | None = None) -> Response:
        """`relay` of a GET of `path` (a filled `route` template) with no query parameters."""
        return self._relayed(host, await self._get(host, path, route, {}, 0.0, deadline))

    @staticmethod
    def _relayed(host: HostInfo, answer: httpx.Response) -> Response:
        if answer.status_code >= 500 and answer.status_code != 503:
            raise NotAvailableError("instance failed", instance=str(host), status=answer.status_code)
        if answer.status_code in (401, 403):  # the client's credentials were good here: ours were refused there
            log.warning("%s refused this instance's credentials (%s): check --rest-principal", host, answer.status_code)
            raise NotAvailableError("instance refused the forwarded query", instance=str(host), status=answer.status_code)
        headers = {name: value for name, value in answer.headers.items() if name in _RELAYED_HEADERS}
        headers.setdefault(SERVED_BY_HEADER.lower(), str(host))
        return Response(answer.content, status_code=answer.status_code, headers=headers)

    async def gather(
        self,
        hosts: Sequence[HostInfo],
        request: Request,
        params: Sequence[Mapping[str, str]],
        deadline: Deadline | None = None,
    ) -> list[httpx.Response]:
        """The answers of every host to this path (asked with its `params`, in the same order), in the
        order of `hosts`: all 200 with JSON, or nothing.

        NotAvailableError (503) if any host is unreachable, does not answer by `deadline`, or does not
        answer 200 with a JSON body.
        """
        answers = await asyncio.gather(
            *(self.get(host, request, asked, deadline=deadline) for host, asked in zip(hosts, params, strict=True)),
            return_exceptions=True,
        )
        for host, answer in zip(hosts, answers, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            if answer.status_code != 200:
                raise NotAvailableError("instance not queryable", instance=str(host), status=answer.status_code)
            if not answer.headers.get("content-type", "").startswith("application/json"):
                raise NotAvailableError("instance answered no JSON", instance=str(host))
        return [answer for answer in answers if not isinstance(answer, BaseException)]
