"""Probes and metrics: `/health` (liveness), `/ready` (readiness: RUNNING), `/metrics` (Prometheus).

Liveness fails only when the client has failed (ERROR, PENDING_ERROR), so an orchestrator
restarts a dead instance but not one that is rebalancing or restoring; readiness is RUNNING,
the state in which stores answer queries. Neither waits on a stream thread: a worker process
that has left a query unanswered for longer than the query deadline (stalled, paused,
overloaded) is listed in `degradedThreads` and the probe still answers at once (a liveness
probe must not restart an instance whose other workers answer). Each probe also sends an idle
worker a ping it does not wait for, so a worker that stopped answering shows by the next probe.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.deps import Settings, Streams
from api.errors import RETRY_AFTER_DOC
from api.instance import StreamsInstance
from api.metrics import CONTENT_TYPE
from api.schemas import DegradedThread, HealthStatus

__all__ = ["degraded_threads", "router"]

router = APIRouter(tags=["health"])

_FAILED = frozenset({"ERROR", "PENDING_ERROR"})


def degraded_threads(streams: StreamsInstance, bound: float) -> list[DegradedThread]:
    """The stream threads whose worker has left a query unanswered for longer than `bound` seconds (no wait)."""
    found = []
    for host in streams.store_queries.hosts():
        waited = host.unanswered_for()
        if waited > bound:
            found.append(DegradedThread(thread=host.host_name, unanswered_ms=int(waited * 1000)))
        else:
            host.probe()
    return found


def _status(ok: bool, streams: StreamsInstance, state: str, settings: Settings) -> JSONResponse:
    degraded = degraded_threads(streams, settings.query_deadline)
    body = HealthStatus(status="UP" if ok else "DOWN", state=state, degraded_threads=degraded).model_dump(by_alias=True)
    headers = None if ok else {"Retry-After": str(settings.retry_after)}
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
    """Liveness: UP unless the KafkaStreams client has failed; stalled workers listed, never waited for."""
    state = streams.state.name
    return _status(state not in _FAILED, streams, state, settings)


@router.get("/ready", response_model=HealthStatus, responses=_PROBE_RESPONSES)
async def ready(streams: Streams, settings: Settings) -> Response:
    """Readiness: UP when the client is RUNNING (its stores answer queries); stalled workers listed, never waited for."""
    state = streams.state.name
    return _status(state == "RUNNING", streams, state, settings)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus text."}},
)
async def metrics(request: Request, streams: Streams, settings: Settings) -> Response:
    """Client, thread, store and query metrics in the Prometheus text format."""
    text = await request.app.state.metrics.render(settings.lag_timeout)
    return Response(text, media_type=CONTENT_TYPE)
