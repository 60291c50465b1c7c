"""HostInfo: the `application.server` endpoint of an instance (KIP-67)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = ["HostInfo"]


@dataclass(slots=True, frozen=True, order=True)
class HostInfo:
    """host and port where an instance answers interactive queries; prints as "host:port"."""

    host: str
    port: int

    UNAVAILABLE: ClassVar[HostInfo]

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> HostInfo:
        """Parse "host:port" or "[ipv6]:port"; ValueError naming the text otherwise."""
        host, sep, port = text.strip().rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port, got {text!r}")
        return cls(host, int(port))

    @classmethod
    def unavailable(cls) -> HostInfo:
        """The placeholder Kafka uses when no host is known ("unavailable", -1)."""
        return cls.UNAVAILABLE


HostInfo.UNAVAILABLE = HostInfo("unavailable", -1)
