"""Secret: a token, password or key passphrase that never shows in a repr, a log line or an error."""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["Secret"]


class Secret:
    """A secret value: `reveal()` gives it to whoever must send or use it; `str`/`repr` give `***`.

    `matches` compares in constant time (digests of equal length), so a wrong guess learns nothing
    from how long the comparison took.
    """

    __slots__ = ("_digest", "_value")

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a secret must not be empty")
        self._value = value
        self._digest = hashlib.sha256(value.encode("utf-8")).digest()

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(self._digest, hashlib.sha256(candidate.encode("utf-8", "surrogateescape")).digest())

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._digest, other._digest)

    def __hash__(self) -> int:
        return hash(self._digest)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret is not pickled (it would leave the process in the clear)")
