"""Probes and metrics: `/health` (liveness), `/ready` (readiness: RUNNING), `/metrics` (Prometheus).

Liveness fails only when the client has failed (ERROR, PENDING_ERROR), so an orchestrator
restarts a dead instance but not one that is rebalancing or restoring; readiness is RUNNING,
the state in which stores answer queries.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.deps import Settings, Streams
from api.errors import RETRY_AFTER_DOC
from api.metrics import CONTENT_TYPE
from api.schemas import HealthStatus

__all__ = ["router"]

router = APIRouter(tags=["health"])

_FAILED = frozenset({"ERROR", "PENDING_ERROR"})


def _status(ok: bool, state: str, retry_after: int) -> JSONResponse:
    body = HealthStatus(status="UP" if ok else "DOWN", state=state).model_dump()
    headers = None if ok else {"Retry-After": str(retry_after)}
    return JSONResponse(body, status_code=200 if ok else 503, headers=headers)


_PROBE_RESPONSES: dict[int | str, dict[str, object]] = {
    503: {
        "model": HealthStatus,
        "description": "DOWN.",
        "headers": {"Retry-After": RETRY_AFTER_DOC},
    }
}


@router.get("/health", response_model=HealthStatus, responses=_PROBE_RESPONSES)
async def health(streams: Streams, settings: Settings) -> Response:
    """Liveness: UP unless the KafkaStreams client has failed."""
    state = streams.state.name
    return _status(state not in _FAILED, state, settings.retry_after)


@router.get("/ready", response_model=HealthStatus, responses=_PROBE_RESPONSES)
async def ready(streams: Streams, settings: Settings) -> Response:
    """Readiness: UP when the client is RUNNING (its stores answer queries)."""
    state = streams.state.name
    return _status(state == "RUNNING", state, settings.retry_after)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus text."}},
)
async def metrics(request: Request, streams: Streams, settings: Settings) -> Response:
    """Client, thread, store and query metrics in the Prometheus text format."""
    text = await request.app.state.metrics.render(settings.lag_timeout)
    return Response(text, media_type=CONTENT_TYPE)
