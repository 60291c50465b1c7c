"""Errors of the REST layer and how they are answered: always JSON `{"error": ..., ...details}`.

- 404: `UnknownStateStoreError` (no such store), `StoreNotFoundError` (a store of another
  type, or one whose IQv2 query is UNKNOWN_QUERY_TYPE), `KeyNotFoundError` (the owner has no
  value for the key), and unknown routes.
- 400: `BadRequestError` (a key the key serde rejects) and invalid parameters (FastAPI's
  validation errors, which would be 422); on every route, a path or query that is not UTF-8
  once percent-decoded (`RequestTargetGuard`).
- 414: on every route, a request target over `MAX_TARGET_BYTES` (`RequestTargetGuard`).
- 503 with `Retry-After`: `InvalidStateStoreError` (rebalancing, restoring, closed),
  `NotAvailableError` (metadata unknown, owner unreachable) and `StreamsNotStartedError`.
  A 503 means "ask again soon", never a partial or wrong answer (docs/rest-api.md, Errors).
- 500: anything else, logged with its traceback (a bug: the conformance tests look for them).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.schemas import ErrorBody
from streams_core.errors import InvalidStateStoreError, StreamsNotStartedError, UnknownStateStoreError

__all__ = [
    "RETRY_AFTER_DOC",
    "TARGET_RESPONSES",
    "ApiError",
    "BadRequestError",
    "KeyNotFoundError",
    "NotAvailableError",
    "StoreNotFoundError",
    "api_error_response",
    "error_responses",
    "exception_response",
    "install_error_handlers",
]

log = logging.getLogger(__name__)

_DESCRIPTIONS = {
    400: "A key or parameter cannot be parsed (e.g. a key the store's key serde rejects).",
    404: "The topology has no such store (of this type, or one that answers the route's query), or the key is absent.",
    503: (
        "Not queryable now (rebalancing, restoring, metadata unknown, owner unreachable): "
        "retry after `Retry-After` seconds."
    ),
}


class ApiError(Exception):
    """An answer other than 200, with its status, its `error` text and JSON details."""

    status_code = 500

    def __init__(self, error: str, **details: Any) -> None:
        super().__init__(error)
        self.error = error
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": self.error, **self.details}


class BadRequestError(ApiError):
    """The request cannot be understood: a key the key serde rejects, a bad range bound..."""

    status_code = 400


class StoreNotFoundError(ApiError):
    """The store exists under another type (e.g. a key-value query on a window store)."""

    status_code = 404


class PartitionNotFoundError(ApiError):
    """A `partitions` parameter names a partition the store does not have (a global store has none)."""

    status_code = 404

    def __init__(self, store: str, partitions: list[int] | str) -> None:
        super().__init__("no such partition", store=store, partitions=partitions)


class KeyNotFoundError(ApiError):
    """The instance that owns the key has no value for it."""

    status_code = 404

    def __init__(self, store: str, key: str) -> None:
        super().__init__("key not found", store=store, key=key)


class NotAvailableError(ApiError):
    """Retriable: the metadata, the owner or a peer is not available now."""

    status_code = 503


_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
TARGET_RESPONSES: dict[str, dict[str, Any]] = {
    "400": {"description": "The path or query is not UTF-8 once percent-decoded.", "content": _ERROR_JSON},
    "414": {"description": "The request target (path and query) is longer than 16 KiB.", "content": _ERROR_JSON},
}
"""What `RequestTargetGuard` may answer on any route, documented on every operation that lacks it."""

RETRY_AFTER_DOC = {"description": "Seconds to wait before asking again.", "schema": {"type": "integer"}}
_SERVED_BY = {"description": "host:port of the instance(s) that produced the answer.", "schema": {"type": "string"}}


def error_responses(*statuses: int, served_by: bool = False) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route for these error statuses, all with an `ErrorBody`.

    `served_by` documents the `X-Served-By` header that every `/state/` answer carries.
    """
    served = {"X-Served-By": _SERVED_BY} if served_by else {}
    responses: dict[int | str, dict[str, Any]] = {200: {"headers": served}} if served_by else {}
    for status in statuses:
        headers = {**served, "Retry-After": RETRY_AFTER_DOC} if status == 503 else served
        responses[status] = {"model": ErrorBody, "description": _DESCRIPTIONS[status]}
        if headers:
            responses[status]["headers"] = headers
    return responses


def _json(status: int, body: dict[str, Any], retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if status == 503 and retry_after is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def api_error_response(exc: ApiError, retry_after: int) -> JSONResponse:
    """The JSON answer of an ApiError, as the app's handler gives it (outside the app too)."""
    return _json(exc.status_code, exc.body(), retry_after)


def exception_response(exc: BaseException, retry_after: int, where: str = "") -> JSONResponse | None:
    """The answer of an exception of the query path (the errors above, unknown or unqueryable stores,
    a client not started); None for any other (a bug: 500). Routes and the key-get path share it."""
    if isinstance(exc, ApiError):
        if exc.status_code == 503:
            log.debug("%s: 503 %s %s", where, exc.error, exc.details)
        return api_error_response(exc, retry_after)
    if isinstance(exc, UnknownStateStoreError):
        return _json(404, {"error": "unknown state store", "reason": str(exc)})
    if isinstance(exc, InvalidStateStoreError):
        log.debug("%s: store not queryable: %s", where, exc)
        return _json(503, {"error": "state store not queryable", "reason": str(exc)}, retry_after)
    if isinstance(exc, StreamsNotStartedError):
        return _json(503, {"error": "streams not started", "reason": str(exc)}, retry_after)
    return None


def _retry_after(request: Request) -> int:
    return int(request.app.state.settings.retry_after)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn the exceptions above into JSON answers."""

    async def query_error(request: Request, exc: Exception) -> JSONResponse:
        answer = exception_response(exc, _retry_after(request), f"{request.method} {request.url.path}")
        assert answer is not None
        return answer

    for kind in (ApiError, UnknownStateStoreError, InvalidStateStoreError, StreamsNotStartedError):
        app.add_exception_handler(kind, query_error)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"in": ".".join(str(part) for part in error.get("loc", ())), "reason": error.get("msg", "")}
            for error in exc.errors()
        ]
        return _json(400, {"error": "invalid request", "problems": problems})

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"error": "internal error", "reason": type(exc).__name__}, status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)
