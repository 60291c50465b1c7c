"""Low-level HTTP helpers of the HTTP chaos tests: raw requests, listening sockets, a recording listener.

`raw_get` sends a request target byte for byte (no client normalises, encodes or refuses it);
`listening` reads from /proc where a process listens on a port; `Recorder` is a local HTTP
listener that notes every connection it gets and answers like an instance would, so a test
can tell whether a server was made to call it.
"""

from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RawAnswer", "Recorder", "listening", "raw_get"]


@dataclass(frozen=True)
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


async def raw_get(port: int, target: bytes, headers: bytes = b"", *, host: bytes = b"127.0.0.1", timeout: float = 10.0) -> RawAnswer:
    """GET `target` exactly as given from 127.0.0.1:`port`, on a new connection; `host` is the Host header."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n" + headers + b"Connection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in header_lines if ": " in line)
    return RawAnswer(int(status_line.split()[1]), {k.lower(): v for k, v in fields.items()}, body)


def listening(pid: int, port: int) -> set[str]:
    """The local addresses on which TCP `port` listens, in the network namespace of process `pid` (from /proc)."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # 32-bit words in host order
                found.add(str(ipaddress.ip_address(packed)))
    return found


@dataclass
class Recorder:
    """A local HTTP listener that records every request head it receives and answers a plausible 200."""

    heads: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def start(self) -> Recorder:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            self.heads.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            self.heads.append(b"(incomplete)")
        body = b'{"key":"planted","value":666}'
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
