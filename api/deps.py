"""Dependencies of the routes, as `Annotated[..., Depends(...)]` aliases.

`Streams`, `Settings` and `Forwarding` hand out what `create_app` put on `app.state`; `KeyValueStore`
and `WindowStore` resolve the `{store}` path parameter to a `StoreInfo` (404 for a store the
topology does not have, or has under another type), which knows the store's key serde;
`Forwarded` tells whether another instance sent the request (then it is answered locally).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request

from api.errors import BadRequestError, StoreNotFoundError
from api.forwarding import HOP_HEADER, Forwarder
from api.instance import StreamsInstance
from api.keys import KeyCodec
from api.settings import ApiSettings
from streams_core import StoreKind

__all__ = [
    "Forwarded",
    "Forwarding",
    "GlobalStore",
    "HopHeader",
    "KeyText",
    "KeyValueStore",
    "SessionStore",
    "Settings",
    "StoreInfo",
    "StoreName",
    "Streams",
    "WindowStore",
    "describe_store",
    "forwarder_of",
    "streams_of",
]

@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What the REST layer needs to know of one store of the topology."""

    name: str
    kind: StoreKind
    keys: KeyCodec
    window_size: int | None = None
    is_global: bool = False

    def parse_key(self, text: str) -> Any:
        """The typed key of a path segment; BadRequestError (400) when the key serde rejects it."""
        try:
            return self.keys.parse(text)
        except ValueError as exc:
            raise BadRequestError("invalid key", store=self.name, key=text, reason=str(exc)) from None


def describe_store(streams: StreamsInstance, name: str) -> StoreInfo:
    """The kind, key codec and window size of a store, from the instance's public description.

    UnknownStateStoreError (404) for a name the topology does not have.
    """
    description = streams.describe_store(name)
    codec = KeyCodec.for_serde(description.key_serde)
    return StoreInfo(name, description.kind, codec, description.window_size, description.is_global)


def streams_of(request: Request) -> StreamsInstance:
    """The instance, for dependencies that read it without a nested `Depends` (each costs a query ~25 us)."""
    return request.app.state.streams  # type: ignore[no-any-return]


def forwarder_of(request: Request) -> Forwarder:
    forwarder = getattr(request.app.state, "forwarder", None)
    if forwarder is None:
        raise RuntimeError("the app's lifespan has not run: serve it with lifespan events on")
    return forwarder  # type: ignore[no-any-return]


async def get_streams(request: Request) -> StreamsInstance:
    return streams_of(request)


async def get_settings(request: Request) -> ApiSettings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def get_forwarder(request: Request) -> Forwarder:
    return forwarder_of(request)


Streams = Annotated[StreamsInstance, Depends(get_streams)]
Settings = Annotated[ApiSettings, Depends(get_settings)]
Forwarding = Annotated[Forwarder, Depends(get_forwarder)]
StoreName = Annotated[str, Path(description="The name of a state store of the topology.")]
KeyText = Annotated[str, Path(description="The key, parsed by the store's key serde.")]


HopHeader = Annotated[
    str | None,
    Header(alias=HOP_HEADER, description="Set by an instance that forwards a query; the receiver answers it locally."),
]


async def _forwarded(forwarded_by: HopHeader = None) -> bool:
    return forwarded_by is not None


Forwarded = Annotated[bool, Depends(_forwarded)]


def _store_of_kind(kind: StoreKind) -> Any:
    async def dependency(request: Request, store: StoreName) -> StoreInfo:
        info = describe_store(streams_of(request), store)
        if info.kind != kind:
            raise StoreNotFoundError(f"not a {kind} store", store=store, kind=info.kind)
        return info

    return Depends(dependency)


async def _global_store(request: Request, store: StoreName) -> StoreInfo:
    info = describe_store(streams_of(request), store)
    if not info.is_global:
        raise StoreNotFoundError("not a global store", store=store, kind=info.kind)
    return info


KeyValueStore = Annotated[StoreInfo, _store_of_kind("key-value")]
WindowStore = Annotated[StoreInfo, _store_of_kind("window")]
SessionStore = Annotated[StoreInfo, _store_of_kind("session")]
GlobalStore = Annotated[StoreInfo, Depends(_global_store)]
