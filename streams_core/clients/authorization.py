"""Authorization and authentication failures explained: who was refused what, on which resource.

aiokafka's errors name the error code and at best the resource (`TopicAuthorizationFailedError:
counts`). `explain` turns such an error, wherever it sits in an exception's chain, into an
`AuthorizationError` naming the principal the application connects as, the operation the
client needed and the resource, with a pointer to docs/security.md. The operation follows from
the client that failed: a producer needs WRITE, a consumer READ, the admin client CREATE (a
topic it creates) or DESCRIBE (a topic it looks up). Never a password in the message.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Final

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)

from streams_core.clients.streams_group_membership import StreamsGroupError
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError

__all__ = ["AuthorizationError", "explain", "is_security_error", "principal_of"]

GROUP_AUTHORIZATION_FAILED: Final = 30

_AUTHORIZATION: Final = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    ClusterAuthorizationFailedError,
)


class AuthorizationError(StreamsError):
    """The broker refused the application's principal an operation on a resource (an ACL is missing)."""

    def __init__(self, principal: str, operation: str, resource_type: str, resources: list[str], cause: str) -> None:
        names = ", ".join(repr(r) for r in resources) or "(not named by the broker)"
        super().__init__(
            f"{principal} is not authorized to {operation} {resource_type} {names} ({cause}); "
            "grant the ACL (docs/security.md lists the ACLs an application needs)"
        )
        self.principal, self.operation, self.resource_type, self.resources = principal, operation, resource_type, resources


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_security_error(error: BaseException) -> bool:
    """An authorization or authentication failure anywhere in the chain: retrying cannot help."""
    return any(isinstance(e, (*_AUTHORIZATION, SaslAuthenticationFailed, AuthorizationError)) for e in _chain(error))


def principal_of(config: StreamsConfig) -> str:
    """The principal the clients connect as, as far as the client side knows it."""
    settings = config.client_overrides("consumer")
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL_"):
        if str(settings.get("sasl.mechanism", "")).upper() == "OAUTHBEARER":
            return "the OAUTHBEARER token's principal (its sub claim)"
        if settings.get("sasl.plain.username"):
            return f"User:{settings['sasl.plain.username']}"
        return "the SASL principal of sasl.jaas.config"
    if protocol == "SSL" and settings.get("ssl.certfile"):
        return f"User:<{_subject(str(settings['ssl.certfile']))}> (as ssl.principal.mapping.rules map it)"
    return "User:ANONYMOUS"


def _subject(certfile: str) -> str:
    """The certificate's subject as `CN=...,O=...` (CPython's own decoder; the file path if it fails)."""
    try:
        decoded = ssl._ssl._test_decode_cert(certfile)  # type: ignore[attr-defined]
        return ",".join(f"{k}={v}" for rdn in reversed(decoded["subject"]) for k, v in rdn)
    except Exception:
        return f"the subject of {certfile}"


def _names(error: BaseException) -> list[str]:
    text = " ".join(str(a) for a in error.args)
    return [n.strip(" {}'\"") for n in text.split(",") if n.strip(" {}'\"")] or []


def _operation(chain: list[BaseException], found: BaseException) -> str:
    """READ, WRITE, CREATE or DESCRIBE from the client whose frames raised `found`."""
    if any("cannot create topic" in str(e) for e in chain):
        return "CREATE"
    if any(type(e).__name__ == "ProductionError" for e in chain):
        return "WRITE"
    files = []
    tb = found.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    if any("aiokafka/producer" in f for f in files):
        return "WRITE"
    if any("aiokafka/consumer" in f for f in files):
        return "READ"
    return "DESCRIBE (READ for a source topic, WRITE for a sink topic)"


def _group_refused(error: BaseException) -> bool:
    """A streams group member refused for a missing READ on the group (GROUP_AUTHORIZATION_FAILED, 30)."""
    return isinstance(error, StreamsGroupError) and error.code == GROUP_AUTHORIZATION_FAILED


def explain(error: BaseException, config: StreamsConfig) -> BaseException:
    """An `AuthorizationError` (caused by `error`) when an ACL was missing; `error` itself otherwise."""
    chain = list(_chain(error))
    found = next((e for e in chain if isinstance(e, _AUTHORIZATION) or _group_refused(e)), None)
    if found is None or isinstance(error, AuthorizationError):
        return error
    principal, cause = principal_of(config), type(found).__name__
    if _group_refused(found):  # the streams group's heartbeat (group.protocol=streams)
        explained = AuthorizationError(principal, "READ", "GROUP", [str(config["application.id"])], str(found))
    elif isinstance(found, TopicAuthorizationFailedError):
        explained = AuthorizationError(principal, _operation(chain, found), "TOPIC", _names(found), cause)
    elif isinstance(found, GroupAuthorizationFailedError):
        group = _names(found) or [str(config["application.id"])]
        explained = AuthorizationError(principal, "READ", "GROUP", group, cause)
    elif isinstance(found, TransactionalIdAuthorizationFailed):
        explained = AuthorizationError(principal, "WRITE", "TRANSACTIONAL_ID", _names(found), cause)
    else:
        explained = AuthorizationError(principal, "IDEMPOTENT_WRITE", "CLUSTER", ["kafka-cluster"], cause)
    explained.__cause__ = error
    return explained
