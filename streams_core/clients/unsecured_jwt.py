"""An OAUTHBEARER token provider of unsigned JWTs, for brokers with Kafka's unsecured validator.

Kafka's default OAUTHBEARER server callback (`OAuthBearerUnsecuredValidatorCallbackHandler`)
accepts `alg: none` tokens and takes the principal from the `sub` claim: enough to test the
OAUTHBEARER path of every client against the local broker (`--oauthbearer`). Production uses a
provider that fetches signed tokens from the identity provider (docs/security.md).
"""

from __future__ import annotations

import base64
import json
import time

from aiokafka.abc import AbstractTokenProvider

__all__ = ["UnsecuredJwtTokenProvider"]


def _segment(payload: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()


class UnsecuredJwtTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """Unsigned tokens for `subject` (the principal `User:<subject>`), valid `lifetime_s` seconds."""

    def __init__(self, subject: str, lifetime_s: int = 3600) -> None:
        self.subject = subject
        self.lifetime_s = lifetime_s

    async def token(self) -> str:
        now = int(time.time())
        claims = {"sub": self.subject, "iat": now, "exp": now + self.lifetime_s}
        return f"{_segment({'alg': 'none'})}.{_segment(claims)}."

    def __repr__(self) -> str:
        return f"UnsecuredJwtTokenProvider({self.subject!r})"
