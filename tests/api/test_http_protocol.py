"""StreamsHttpProtocol: httptools under uvicorn, reading request targets as the API's contract says
(a raw `#` is part of the key, an overlong target gets the JSON 414 with its true length, an
oversized head a plain 400)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from api import serve
from api.http_protocol import MAX_HEAD_BYTES
from api.middleware import MAX_TARGET_BYTES
from api.server import ServerHandle
from api.settings import ApiSettings
from streams_core.common.partitioner import default_partition
from tests.api.fakes import COUNTS, PARTITIONS, Cluster


def _owned_by_a(key: str) -> bool:
    return default_partition(key.encode(), PARTITIONS) == 0  # A owns partition 0 (tests/api/fakes.py)


PLAIN = next(f"k{i}" for i in range(100) if _owned_by_a(f"k{i}"))
HASHED = next(f"{PLAIN}#{i}" for i in range(100) if _owned_by_a(f"{PLAIN}#{i}"))
"""A key with a `#` on instance A, as is the key before its `#`."""


@pytest.fixture
async def server() -> AsyncIterator[ServerHandle]:
    cluster = Cluster(ApiSettings())
    cluster.put(COUNTS, HASHED, 2)
    cluster.put(COUNTS, PLAIN, 1)
    handle = await serve(cluster.a, "127.0.0.1", 0)
    try:
        yield handle
    finally:
        await handle.stop()
        cluster.close()


async def _exchange(handle: ServerHandle, *requests: bytes, piece: int = 0) -> list[tuple[int, dict[str, str], bytes]]:
    """Send raw requests on one connection (in `piece`-byte writes when given), read each answer."""
    reader, writer = await asyncio.open_connection(handle.host, handle.port)
    answers = []
    try:
        for request in requests:
            step = piece or len(request)
            for start in range(0, len(request), step):
                writer.write(request[start : start + step])
                await writer.drain()
            status = int((await reader.readline()).split()[1])
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.lower()] = value.strip()
            answers.append((status, headers, await reader.readexactly(int(headers.get("content-length", 0)))))
    finally:
        writer.close()
    return answers


def _get(target: bytes, extra: bytes = b"") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\nHost: test\r\n" + extra + b"\r\n"


async def test_a_raw_hash_is_part_of_the_key(server: ServerHandle) -> None:
    ((status, _, body),) = await _exchange(server, _get(f"/state/keyvalue/{COUNTS}/{HASHED}".encode()))
    assert status == 200 and json.loads(body) == {"key": HASHED, "value": 2}
    ((status, _, body),) = await _exchange(server, _get(f"/state/keyvalue/{COUNTS}/{PLAIN}".encode()))
    assert status == 200 and json.loads(body) == {"key": PLAIN, "value": 1}


@pytest.mark.parametrize("size", [MAX_TARGET_BYTES + 1, 40_000, 100_000])
async def test_an_overlong_target_gets_the_json_414_with_its_length(server: ServerHandle, size: int) -> None:
    prefix = f"/state/keyvalue/{COUNTS}/".encode()
    target = prefix + b"k" * (size - len(prefix))
    ((status, headers, body),) = await _exchange(server, _get(target), piece=4096)
    assert status == 414 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": "request target too long", "length": size, "limit": MAX_TARGET_BYTES}


async def test_the_connection_serves_on_after_a_414(server: ServerHandle) -> None:
    answers = await _exchange(server, _get(b"/state/" + b"x" * 70_000), _get(f"/state/keyvalue/{COUNTS}/{PLAIN}".encode()))
    assert [status for status, _, _ in answers] == [414, 200]


async def test_a_head_over_the_bound_is_refused(server: ServerHandle) -> None:
    big = b"X-Big: " + b"v" * MAX_HEAD_BYTES + b"\r\n"
    ((status, headers, _),) = await _exchange(server, _get(b"/health", big), piece=16384)
    assert status == 400 and headers.get("connection") == "close"
    ((status, _, _),) = await _exchange(server, _get(b"/health", b"X-Fine: " + b"v" * 60_000 + b"\r\n"))
    assert status == 200
