"""Every route of openapi.yaml answers the same with one trailing slash (as Jersey-based Kafka
Streams REST services do), through the app and through the key-get fast path alike."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("yaml", reason="needs PyYAML (dev extra: pyyaml)")

from api import create_app
from api.forwarding import Forwarder
from api.key_gets import KeyGetFastPath
from api.metrics import StreamsMetrics
from api.middleware import TrailingSlashMiddleware
from tests.api.conformance import OPERATION_IDS, OPERATIONS, STORES, build, parameters, samples
from tests.api.conftest import WORDS
from tests.api.fakes import COUNTS, HOST_A, Cluster
from tests.api.test_key_gets import _App

pytestmark = pytest.mark.asyncio


def _requests(method: str, template: str) -> list[str]:
    """A valid path of the operation for each store (and for an unknown one), without a query."""
    params = [p for p in parameters(method, template) if p["in"] == "path"]
    stores = STORES if any(p["name"] == "store" for p in params) else [""]
    paths = []
    for store in stores:
        values = {p["name"]: samples(p, store)[0] for p in params}
        if "store" in values:
            values["store"] = store
        paths.append(build(template, values, {}, {})[0])
    return paths


@pytest.mark.parametrize(("method", "template"), OPERATIONS, ids=OPERATION_IDS)
async def test_a_trailing_slash_gets_the_same_answer(client: httpx.AsyncClient, method: str, template: str) -> None:
    for path in _requests(method, template):
        plain = await client.request(method, path)
        slashed = await client.request(method, path + "/")
        where = f"{method} {path}/"
        assert slashed.status_code == plain.status_code, f"{where}: {slashed.status_code} {slashed.text[:200]}"
        assert slashed.headers.get("content-type") == plain.headers.get("content-type"), where
        if template != "/metrics":  # the scrape counts the requests just made
            assert slashed.content == plain.content, where
        assert slashed.content != b'{"error":"Not Found"}', f"{where}: no route answered"


async def test_without_the_middleware_a_slashed_path_finds_no_route(cluster: Cluster) -> None:
    """The checks above can fail: the same app without the middleware answers `/health/` with the
    router's own 404."""
    app = create_app(cluster.a, settings=cluster.settings)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not TrailingSlashMiddleware]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=f"http://{HOST_A}") as client:
        assert (await client.get("/health")).status_code == 200
        answer = await client.get("/health/")
    assert answer.status_code == 404 and answer.content == b'{"error":"Not Found"}'


async def test_only_a_slash_sent_as_such_is_dropped(client: httpx.AsyncClient) -> None:
    """`%2F` at the end is part of the key: the answer stays the one for that key (absent here)."""
    word = next(iter(WORDS))
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{word}/")).json() == {"key": word, "value": WORDS[word]}
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{word}%2F")).status_code == 404
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{word}//")).status_code == 404


async def test_the_fast_path_answers_slashed_key_gets_itself(cluster: Cluster) -> None:
    app = _App()
    forwarder = Forwarder(cluster.transport, cluster.settings.timeout(), HOST_A)
    fast = TrailingSlashMiddleware(KeyGetFastPath(app, cluster.a, StreamsMetrics(cluster.a), HOST_A, lambda: forwarder))
    local = [word for word in WORDS if cluster.owner_host(word) == HOST_A]
    assert local
    async with httpx.AsyncClient(transport=httpx.ASGITransport(fast), base_url=f"http://{HOST_A}") as client:
        for word in local:
            answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}/")
            assert answer.status_code == 200 and answer.json() == {"key": word, "value": WORDS[word]}
        await client.get("/health/")
    assert app.paths == ["/health"]
