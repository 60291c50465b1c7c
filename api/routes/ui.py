"""The dashboard at `/ui`: a static page (api/static/) that reads the JSON routes of this instance.

The page, its script and its style are files shipped in the package and served as they are
(no build step, nothing from another origin, so it works offline). It draws `/topology`, lists
`/state/instances` and reads each instance's `/metrics` through `/metrics/{instance}`: this
instance relays the other instances' metrics, so the page needs a single origin (a browser
does not let a page read another origin's answers). Only members of the application are relayed.
"""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated

import httpx
from fastapi import APIRouter, HTTPException, Path, Request, Response
from fastapi.responses import FileResponse

from api.deps import Forwarding, Settings, Streams
from api.errors import ApiError, NotAvailableError, error_responses
from api.forwarding import SERVED_BY_HEADER
from api.metrics import CONTENT_TYPE
from streams_core import HostInfo, State

__all__ = ["STATIC_DIR", "router"]

router = APIRouter(tags=["health"])

STATIC_DIR = FilePath(__file__).resolve().parent.parent / "static"
_ASSETS = {"dashboard.js": "text/javascript; charset=utf-8", "dashboard.css": "text/css; charset=utf-8"}
_NO_CACHE = {"Cache-Control": "no-cache"}

InstanceName = Annotated[
    str, Path(description="An instance of the application as `host:port` (its application.server, as /state/instances names it).")
]


class UnknownInstanceError(ApiError):
    """The instance named is not a member of the application."""

    status_code = 404


@router.get("/ui", include_in_schema=False)
async def dashboard() -> FileResponse:
    """The dashboard page."""
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=_NO_CACHE)


@router.get("/ui/static/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """The page's script and style; nothing else is served from the package."""
    if name not in _ASSETS:
        raise HTTPException(404, "not found")
    return FileResponse(STATIC_DIR / name, media_type=_ASSETS[name], headers=_NO_CACHE)


def _member(streams: Streams, instance: str) -> HostInfo:
    """The HostInfo of `instance` if it is a member of the application; 404 if not, 503 while the members are not known."""
    for metadata in streams.all_metadata():
        if str(metadata.host_info) == instance:
            return metadata.host_info
    if streams.state is not State.RUNNING:
        raise NotAvailableError("metadata not available", state=streams.state.name)
    raise UnknownInstanceError("unknown instance", instance=instance)


_ERROR = {"$ref": "#/components/schemas/ErrorBody"}
_NOT_AVAILABLE = error_responses(503)[503]
_SERVED_BY = {"description": "host:port of the instance whose metrics these are.", "schema": {"type": "string"}}


@router.get(
    "/metrics/{instance}",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "Prometheus text of that instance.",
            "headers": {"X-Served-By": _SERVED_BY},
        },
        404: {"content": {"application/json": {"schema": _ERROR}}, "description": "Not an instance of the application."},
        503: {**_NOT_AVAILABLE, "content": {"application/json": {"schema": _ERROR}}},
    },
)
async def instance_metrics(
    request: Request, streams: Streams, settings: Settings, forwarder: Forwarding, instance: InstanceName
) -> Response:
    """The `/metrics` of an instance of the application, relayed by this one (this one's own when it is named)."""
    headers = {SERVED_BY_HEADER: instance}
    if forwarder.this_host is not None and instance == str(forwarder.this_host):
        text = await request.app.state.metrics.render(settings.lag_timeout)
        return Response(text, media_type=CONTENT_TYPE, headers=headers)
    host = _member(streams, instance)
    url = httpx.URL(scheme=forwarder.scheme, host=host.host, port=host.port, path="/metrics")
    try:
        answer = await forwarder.fetch(url)
    except httpx.HTTPError as exc:
        raise NotAvailableError("instance unreachable", instance=instance, reason=type(exc).__name__) from None
    if answer.status_code != 200:
        raise NotAvailableError("instance failed", instance=instance, status=answer.status_code)
    return Response(answer.content, media_type=CONTENT_TYPE, headers=headers)
