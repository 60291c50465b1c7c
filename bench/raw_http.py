"""A minimal blocking HTTP/1.1 GET client for the latency benchmarks.

On this 2-core machine the benchmark client shares the CPU with the instances it measures, so
what it costs is taken from their processing. httpx's sync client costs ~0.8 ms of CPU per
request (0.2 cores at 250 gets/s); this one writes a prebuilt request and reads the answer by its
`Content-Length`, a few tens of microseconds. It understands only what the REST server sends:
`Content-Length` bodies (no chunked encoding), `Connection: close`.
"""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RawHttpClient", "RawResponse"]


class RawResponse:
    """Status, lower-cased headers and body of one answer (what the benchmarks' checks read)."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def json(self) -> Any:
        return json.loads(self.content)


class RawHttpClient:
    """GETs over one kept-alive connection per server, or a new connection per request."""

    def __init__(self, *, keep_alive: bool = True, timeout: float = 30.0) -> None:
        self.keep_alive = keep_alive
        self.timeout = timeout
        self._connections: dict[tuple[str, int], tuple[socket.socket, Any]] = {}

    def __enter__(self) -> RawHttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for sock, reader in self._connections.values():
            reader.close()
            sock.close()
        self._connections.clear()

    def get(self, url: str) -> RawResponse:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        closing = "" if self.keep_alive else "Connection: close\r\n"
        request = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n{closing}\r\n".encode("ascii")
        sock, reader = self._connection(host, port)
        try:
            sock.sendall(request)
            answer, close = self._read(reader)
        except OSError:
            self._drop(host, port)
            raise
        if close or not self.keep_alive:
            self._drop(host, port)
        return answer

    def _connection(self, host: str, port: int) -> tuple[socket.socket, Any]:
        found = self._connections.get((host, port))
        if found is None:
            sock = socket.create_connection((host, port), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            found = (sock, sock.makefile("rb"))
            self._connections[(host, port)] = found
        return found

    def _drop(self, host: str, port: int) -> None:
        found = self._connections.pop((host, port), None)
        if found is not None:
            found[1].close()
            found[0].close()

    @staticmethod
    def _read(reader: Any) -> tuple[RawResponse, bool]:
        status_line = reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while True:
            line = reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = reader.read(int(headers.get("content-length", "0")))
        return RawResponse(status, headers, body), headers.get("connection", "").lower() == "close"
