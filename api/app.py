"""create_app: the interactive-query and discovery server of one KafkaStreams instance.

The app holds the `KafkaStreams` instance and, for its lifespan, the transport that forwards
queries to the other instances. Its served schema (`/openapi.json`) must agree with the
contract in `openapi.yaml` (tests/api/test_openapi_contract.py holds them to it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from api.auth import AUTH_RESPONSES, SECURITY_SCHEMES, AuthMiddleware
from api.errors import TARGET_RESPONSES, install_error_handlers
from api.forwarding import Forwarder, instance_name, peer_transport
from api.instance import StreamsInstance
from api.key_gets import KeyGetFastPath
from api.metrics import StreamsMetrics
from api.middleware import QueryTimingMiddleware, RequestTargetGuard, ServedByMiddleware, TrailingSlashMiddleware
from api.routes import health, instances, state, topology, ui
from api.settings import ApiSettings
from streams_core import HostInfo

__all__ = ["create_app"]

log = logging.getLogger(__name__)

VERSION = "1.0.0"


def _this_host(streams: StreamsInstance) -> HostInfo | None:
    server = streams.config["application.server"]
    return HostInfo.parse(server) if server else None


def _operation_id(route: APIRoute) -> str:
    return route.name


def _without_validation_errors(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema minus its 422 answers (this app answers invalid requests with 400), plus
    the 400 and 414 of `RequestTargetGuard`, which stands before every route, and the security
    schemes with the 401 (and, on routes naming a store, 403) of `AuthMiddleware`."""
    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)
        for name, path in schema.get("paths", {}).items():
            for operation in path.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                for status, answer in TARGET_RESPONSES.items():
                    responses.setdefault(status, answer)
                responses.setdefault("401", AUTH_RESPONSES["401"])
                if "{store}" in name:
                    responses.setdefault("403", AUTH_RESPONSES["403"])
                operation["responses"] = dict(sorted(responses.items()))
        schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
        schema["security"] = [{}, {"bearerAuth": []}, {"basicAuth": []}]
        components = schema.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema


def create_app(streams: StreamsInstance, *, settings: ApiSettings | None = None) -> FastAPI:
    """The REST app of docs/rest-api.md's routes for `streams`; serve it with `api.serve` or any ASGI server."""
    settings = settings or ApiSettings()
    this_host = _this_host(streams)
    peer_context = settings.tls.client_context() if settings.tls is not None else None
    own = settings.own_principal()
    if settings.credentials is not None and own is None and this_host is not None:
        log.warning("no REST principal set (--rest-principal): other instances will refuse this one's forwarded queries")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with settings.transport or peer_transport(peer_context or True) as transport:
            app.state.forwarder = Forwarder(
                transport,
                settings.timeout(),
                this_host,
                settings.peer_scheme,
                on_forward=app.state.metrics.forwarded,
                authorization=own.authorization() if own is not None else None,
            )
            log.info("REST server for %r up as %s", streams.application_id, this_host or "a single instance")
            yield
        log.info("REST server for %r down", streams.application_id)

    app = FastAPI(
        title="streams-core interactive queries",
        version=VERSION,
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        redirect_slashes=False,
    )
    app.state.streams = streams
    app.state.settings = settings
    app.state.peer_ssl_context = peer_context
    app.state.metrics = StreamsMetrics(streams)
    install_error_handlers(app)
    for module in (instances, state, topology, health, ui):
        app.include_router(module.router)
    app.add_middleware(RequestTargetGuard)
    app.add_middleware(ServedByMiddleware, served_by=instance_name(this_host))
    app.add_middleware(QueryTimingMiddleware, metrics=app.state.metrics)
    app.add_middleware(
        KeyGetFastPath,
        streams=streams,
        metrics=app.state.metrics,
        this_host=this_host,
        forwarder=lambda: getattr(app.state, "forwarder", None),
        retry_after=settings.retry_after,
        query_deadline=settings.query_deadline,
    )
    if settings.credentials is not None:
        app.add_middleware(AuthMiddleware, credentials=settings.credentials, open_probes=settings.open_probes)
    app.add_middleware(TrailingSlashMiddleware)
    app.openapi = lambda: _without_validation_errors(app)  # type: ignore[method-assign]
    return app
