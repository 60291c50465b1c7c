"""ApiSettings: the knobs of the REST layer, given to `create_app` (defaults suit a LAN cluster)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

__all__ = ["ApiSettings"]


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Timeouts of forwarded queries, the `Retry-After` of a 503, and the forwarding transport.

    `transport` replaces the network transport of forwarded queries (`api.forwarding.peer_transport()`);
    tests route `host:port` to in-process apps with it.
    """

    forward_timeout: float = 5.0
    """Seconds a forwarded query may take in total (read, write, pool), plus its `timeoutMs` when it waits for a `position`."""
    connect_timeout: float = 1.0
    """Seconds to connect to another instance before it counts as unreachable (503)."""
    retry_after: int = 1
    """Seconds put in the `Retry-After` header of every 503."""
    lag_timeout: float = 2.0
    """Seconds `/metrics` waits for changelog end offsets before it leaves the lag out."""
    scheme: str = "http"
    """How other instances are reached."""
    transport: httpx.AsyncBaseTransport | None = None

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.forward_timeout, connect=self.connect_timeout)
