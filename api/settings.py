"""ApiSettings: the knobs of the REST layer, given to `create_app` (defaults suit a LAN cluster)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from api.auth import Credentials, Principal
from api.tls import TlsSettings

__all__ = ["QUERY_DEADLINE_ENV", "ApiSettings"]

QUERY_DEADLINE_ENV = "STREAMS_QUERY_DEADLINE_MS"
"""The environment variable of `query_deadline`, in milliseconds (the service's `--query-deadline-ms`)."""


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Timeouts of forwarded queries, the `Retry-After` of a 503, and the forwarding transport.

    `transport` replaces the network transport of forwarded queries (`api.forwarding.peer_transport()`);
    tests route `host:port` to in-process apps with it.
    """

    query_deadline: float = 5.0
    """Seconds a query may take in all (its reads of this instance's stream threads and workers, its
    forwards) before it answers 503 with `Retry-After`; a `position` bound's `timeoutMs` comes on
    top. Also how long a worker may leave its query channel unanswered before `/health` and `/ready`
    report its thread as degraded."""
    forward_timeout: float = 5.0
    """Seconds a forwarded query may take in total (read, write, pool), plus its `timeoutMs` when it waits for a `position`."""
    connect_timeout: float = 1.0
    """Seconds to connect to another instance before it counts as unreachable (503)."""
    retry_after: int = 1
    """Seconds put in the `Retry-After` header of every 503."""
    lag_timeout: float = 2.0
    """Seconds `/metrics` waits for changelog end offsets before it leaves the lag out."""
    scheme: str = "http"
    """How other instances are reached without `tls` (with it: https)."""
    transport: httpx.AsyncBaseTransport | None = None
    tls: TlsSettings | None = None
    """HTTPS (and mutual TLS) of this server and of its forwarded queries (api/tls.py); plain HTTP without."""
    credentials: Credentials | None = None
    """The principals a request must authenticate as (api/auth.py); every request is let in without."""
    principal: str | None = None
    """The principal of `credentials` whose token (or password) this instance sends to the others."""
    open_probes: bool = True
    """`/health` and `/ready` answer without credentials (probes of an orchestrator)."""

    def __post_init__(self) -> None:
        if self.principal is not None and (self.credentials is None or self.principal not in self.credentials.principals):
            raise ValueError(f"the REST principal {self.principal!r} is not in the credentials")

    @property
    def peer_scheme(self) -> str:
        """How other instances are reached: https when this one serves TLS (they all do alike)."""
        return "https" if self.tls is not None else self.scheme

    def own_principal(self) -> Principal | None:
        """The principal whose credentials forwarded queries carry."""
        if self.credentials is None or self.principal is None:
            return None
        return self.credentials.principals[self.principal]

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.forward_timeout, connect=self.connect_timeout)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> ApiSettings:
        """Settings with `query_deadline` from STREAMS_QUERY_DEADLINE_MS when it is set; ValueError when it is
        not a positive number of milliseconds."""
        environ = os.environ if environ is None else environ
        text = environ.get(QUERY_DEADLINE_ENV)
        if text:
            try:
                millis = int(text)
            except ValueError:
                millis = 0
            if millis <= 0:
                raise ValueError(f"{QUERY_DEADLINE_ENV}: expected a positive number of milliseconds, got {text!r}")
            overrides.setdefault("query_deadline", millis / 1000)
        return cls(**overrides)  # type: ignore[arg-type]
