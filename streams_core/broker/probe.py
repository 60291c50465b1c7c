"""The local broker's readiness probe: a raw Kafka MetadataRequest, over TLS and SASL/PLAIN if asked.

Raw protocol keeps the broker module free of aiokafka and usable from inside or outside an event
loop. The broker answers requests only once it has caught up with the metadata log and is
unfenced, so a response listing a broker means a client can work with it.
"""

from __future__ import annotations

import socket
import ssl
import struct

__all__ = ["probe_metadata"]

_CLIENT_ID = b"streams-core-probe"


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def _call(sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """Send one request (header v1: not a flexible version) and return the response body."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    request = header + body
    sock.sendall(struct.pack(">i", len(request)) + request)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    data = _recv_exact(sock, size)
    (got_id,) = struct.unpack_from(">i", data, 0)
    if got_id != correlation_id:
        raise ConnectionError(f"unexpected correlation id {got_id}")
    return data[4:]


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _sasl_plain(sock: socket.socket, username: str, password: str) -> None:
    """SaslHandshake v1 (PLAIN) then SaslAuthenticate v1; a refusal raises ConnectionError."""
    (error,) = struct.unpack_from(">h", _call(sock, 17, 1, 1, _string("PLAIN")), 0)
    if error:
        raise ConnectionError(f"SASL handshake refused (error {error})")
    token = b"\0" + username.encode() + b"\0" + password.encode()
    body = _call(sock, 36, 1, 2, struct.pack(">i", len(token)) + token)
    (error,) = struct.unpack_from(">h", body, 0)
    if error:
        raise ConnectionError(f"SASL authentication failed (error {error})")


def probe_metadata(
    host: str,
    port: int,
    timeout: float = 2.0,
    *,
    ssl_context: ssl.SSLContext | None = None,
    sasl_plain: tuple[str, str] | None = None,
) -> int:
    """Send a MetadataRequest (v4, no topics) and return how many brokers it lists.

    `ssl_context` wraps the connection in TLS (SSL and SASL_SSL listeners); `sasl_plain`
    (user, password) authenticates with SASL/PLAIN first (SASL_* listeners).
    """
    with socket.create_connection((host, port), timeout=timeout) as raw:
        raw.settimeout(timeout)
        sock = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
        try:
            if sasl_plain is not None:
                _sasl_plain(sock, *sasl_plain)
            # topics: empty array; allow_auto_topic_creation=false
            body = _call(sock, 3, 4, 7, struct.pack(">i?", 0, False))
        finally:
            if sock is not raw:
                sock.close()
    _throttle_ms, n_brokers = struct.unpack_from(">ii", body, 0)
    return int(n_brokers)
