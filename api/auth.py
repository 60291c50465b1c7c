"""Authentication of the REST layer: Bearer tokens or HTTP Basic, mapped to principals.

The credentials file (JSON, kept out of the command line) names each principal with a `token`,
a `password` (HTTP Basic with the principal's name as user) or both, and optionally the
`stores` it may query (every store when absent):

    {"dashboard": {"password": "..."}, "billing": {"token": "...", "stores": ["counts"]},
     "instances": {"token": "..."}}

`AuthMiddleware` stands before every route (the key-get fast path too): a request without valid
credentials gets 401 with `WWW-Authenticate`, one naming a store its principal may not query 403,
both with the JSON error body of every error. The probes (`/health`, `/ready`) stay open unless
told otherwise, and so does the dashboard's page and files (`/ui`), which hold no data: its data
comes from the protected routes, with the credentials the browser or the page sends.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.secrets import Secret

__all__ = [
    "AUTH_RESPONSES",
    "SECURITY_SCHEMES",
    "AuthMiddleware",
    "Credentials",
    "Principal",
    "store_of",
]

log = logging.getLogger(__name__)

REALM = "streams"
_CHALLENGES = (f'Bearer realm="{REALM}"', f'Basic realm="{REALM}", charset="UTF-8"')
_STORE_ROUTES = frozenset({"instances", "instance", "keyvalue", "keyvalues", "windowed", "session", "global"})
_PROBES = ("/health", "/ready")

_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
AUTH_RESPONSES: dict[str, dict[str, Any]] = {
    "401": {
        "description": "No credentials, or wrong ones (when the server requires authentication).",
        "headers": {"WWW-Authenticate": {"description": "The schemes accepted: Bearer and Basic.", "schema": {"type": "string"}}},
        "content": _ERROR_JSON,
    },
    "403": {"description": "The principal may not query this store.", "content": _ERROR_JSON},
}
"""What `AuthMiddleware` may answer: 401 on every operation, 403 on those that name a store."""
SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "bearerAuth": {"type": "http", "scheme": "bearer"},
    "basicAuth": {"type": "http", "scheme": "basic"},
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request, and the stores it may query (None: all)."""

    name: str
    token: Secret | None = field(default=None, repr=False)
    password: Secret | None = field(default=None, repr=False)
    stores: frozenset[str] | None = None

    def may_query(self, store: str) -> bool:
        return self.stores is None or store in self.stores

    def authorization(self) -> str:
        """The `Authorization` header this principal sends (its token, else its name and password)."""
        if self.token is not None:
            return f"Bearer {self.token.reveal()}"
        if self.password is not None:
            pair = f"{self.name}:{self.password.reveal()}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        raise ValueError(f"principal {self.name!r} has neither a token nor a password")


class Credentials:
    """The principals the server accepts; `authenticate` maps an `Authorization` header to one."""

    def __init__(self, principals: Iterable[Principal]) -> None:
        self.principals = {principal.name: principal for principal in principals}
        tokens = [principal.token for principal in self.principals.values() if principal.token is not None]
        if len(set(tokens)) != len(tokens):
            raise ValueError("two principals share a token")

    def __repr__(self) -> str:
        return f"Credentials({sorted(self.principals)})"

    @classmethod
    def from_mapping(cls, entries: Mapping[str, Any], where: str = "credentials") -> Credentials:
        """Principals from `{name: {"token": ..., "password": ..., "stores": [...]}}`; ValueError naming the
        principal and field when an entry is malformed (never its value)."""
        principals = []
        for name, entry in entries.items():
            if not isinstance(entry, Mapping) or not name or ":" in name:
                raise ValueError(f"{where}: principal {name!r}: expected an object, and a name without ':'")
            unknown = set(entry) - {"token", "password", "stores"}
            if unknown:
                raise ValueError(f"{where}: principal {name!r}: unknown fields {sorted(unknown)}")
            secrets = {}
            for kind in ("token", "password"):
                value = entry.get(kind)
                if value is not None and (not isinstance(value, str) or not value):
                    raise ValueError(f"{where}: principal {name!r}: {kind} must be a non-empty string")
                secrets[kind] = Secret(value) if value else None
            if not any(secrets.values()):
                raise ValueError(f"{where}: principal {name!r} has neither a token nor a password")
            stores = entry.get("stores")
            if stores is not None and (not isinstance(stores, list) or not all(isinstance(s, str) for s in stores)):
                raise ValueError(f"{where}: principal {name!r}: stores must be a list of store names")
            principals.append(Principal(name, secrets["token"], secrets["password"], None if stores is None else frozenset(stores)))
        return cls(principals)

    @classmethod
    def load(cls, path: str | Path) -> Credentials:
        """The principals of a JSON credentials file; ValueError (naming no secret) when it is malformed."""
        try:
            entries = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno})") from None
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: expected an object of principals")
        return cls.from_mapping(entries, str(path))

    def authenticate(self, authorization: str | None) -> Principal | str:
        """The principal of an `Authorization` header, or why there is none."""
        if not authorization:
            return "no credentials"
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            for principal in self.principals.values():
                if principal.token is not None and principal.token.matches(value):
                    return principal
            return "invalid credentials"
        if scheme.lower() == "basic" and value:
            try:
                user, colon, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return "malformed credentials"
            named = self.principals.get(user)
            if colon and named is not None and named.password is not None and named.password.matches(password):
                return named
            return "invalid credentials"
        return "unsupported authorization scheme"


def store_of(path: str) -> str | None:
    """The store a `/state/<route>/{store}/...` path names (as the router reads it), or None."""
    parts = path.split("/", 4)
    if len(parts) >= 4 and parts[1] == "state" and parts[2] in _STORE_ROUTES and parts[3]:
        return parts[3]
    return None


class AuthMiddleware:
    """Refuses, before any route runs, a request without valid credentials (401) or for a store its
    principal may not query (403); puts the principal's name in `scope["user"]` otherwise."""

    def __init__(self, app: ASGIApp, credentials: Credentials, open_probes: bool = True) -> None:
        self.app = app
        self.credentials = credentials
        self.open_paths = frozenset(_PROBES if open_probes else ()) | {"/ui"}

    def _open(self, path: str) -> bool:
        return path in self.open_paths or path.startswith("/ui/static/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._open(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        found = self.credentials.authenticate(header.decode("latin-1") if header is not None else None)
        if isinstance(found, str):
            log.debug("%s %s: 401 (%s)", scope["method"], scope["path"], found)
            answer = JSONResponse({"error": "unauthorized", "reason": found}, status_code=401)
            for challenge in _CHALLENGES:
                answer.headers.append("WWW-Authenticate", challenge)
            await answer(scope, receive, send)
            return
        store = store_of(scope["path"])
        if store is not None and not found.may_query(store):
            log.debug("%s %s: 403 for %s", scope["method"], scope["path"], found.name)
            body = {"error": "forbidden", "reason": "the principal may not query this store", "principal": found.name, "store": store}
            await JSONResponse(body, status_code=403)(scope, receive, send)
            return
        await self.app({**scope, "user": found.name}, receive, send)
