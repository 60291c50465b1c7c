"""KeyGetFastPath: a plain key get is answered by the route's own function without FastAPI's layers,
exactly as the app answers it (200, 404, 400, 503, relayed); every other request reaches the app untouched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from api.forwarding import HOP_HEADER, Forwarder
from api.key_gets import ROUTE, KeyGetFastPath
from api.metrics import StreamsMetrics
from streams_core import Serdes
from tests.api.conftest import NUMBERS, WORDS
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, WINDOWED, Cluster

pytestmark = pytest.mark.asyncio


class _App:
    """The app behind the fast path: records the requests it was handed, answers 299."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"app"})


@pytest.fixture
async def fast(cluster: Cluster) -> AsyncIterator[tuple[httpx.AsyncClient, _App, StreamsMetrics]]:
    """The fast path of instance A with the app's forwarder: keys of B are relayed from B."""
    app = _App()
    metrics = StreamsMetrics(cluster.a)
    forwarder = Forwarder(cluster.transport, cluster.settings.timeout(), HOST_A, on_forward=metrics.forwarded)
    middleware = KeyGetFastPath(app, cluster.a, metrics, HOST_A, forwarder=lambda: forwarder, retry_after=7)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(middleware), base_url=f"http://{HOST_A}") as client:
        yield client, app, metrics


forwarding = fast


def _local_words(cluster: Cluster) -> list[str]:
    words = [word for word in WORDS if cluster.owner_host(word) == HOST_A]
    assert words and len(words) < len(WORDS), "the fixture's words should be spread over both instances"
    return words


async def test_a_plain_local_get_is_answered_without_the_app(
    cluster: Cluster, fast: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    client, app, metrics = fast
    cluster.a.positions = {0: 41, 1: 17}
    for word in _local_words(cluster):
        answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"key": word, "value": WORDS[word]}
        assert answer.headers["x-served-by"] == str(HOST_A)
        assert answer.headers["x-streams-position"].startswith("words:")
    assert app.paths == []
    answered = metrics.registry.get_sample_value("streams_query_responses_total", {"route": ROUTE, "code": "200"})
    assert answered == len(_local_words(cluster))


async def test_long_keys_are_parsed_by_the_stores_key_serde(
    cluster: Cluster, fast: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    client, app, _ = fast
    local = [n for n in NUMBERS if cluster.owner_host(n, Serdes.Long()) == HOST_A]
    assert local
    for number in local:
        answer = await client.get(f"/state/keyvalue/{IDS}/{number}")
        assert answer.status_code == 200 and answer.json() == {"key": number, "value": NUMBERS[number]}
    assert app.paths == []


async def test_everything_else_goes_to_the_app(cluster: Cluster, fast: tuple[httpx.AsyncClient, _App, StreamsMetrics]) -> None:
    client, app, _ = fast
    word = _local_words(cluster)[0]
    remote = next(w for w in WORDS if cluster.owner_host(w) == HOST_B)
    assert remote
    handed_over = {
        "an unknown store": f"/state/keyvalue/nope/{word}",
        "a window store": f"/state/keyvalue/{WINDOWED}/{word}",
        "a query string": f"/state/keyvalue/{COUNTS}/{word}?stale=true",
        "a path segment more": f"/state/keyvalue/{COUNTS}/{word}/x",
        "no key": f"/state/keyvalue/{COUNTS}/",
        "another route": f"/state/keyvalues/{COUNTS}/all",
        "a path that is not UTF-8": f"/state/keyvalue/{COUNTS}/%ff",
        "a target too long": f"/state/keyvalue/{COUNTS}/{'x' * 20_000}",
    }
    for why, target in handed_over.items():
        answer = await client.get(target)
        assert answer.status_code == 299, why
    assert (await client.post(f"/state/keyvalue/{COUNTS}/{word}")).status_code == 299
    assert len(app.paths) == len(handed_over) + 1


async def test_absent_keys_bad_keys_and_nothing_queryable_are_answered_without_the_app(
    cluster: Cluster, fast: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    """One path: the route's function answers every plain get, its errors rendered as the app renders them."""
    client, app, metrics = fast
    word = _local_words(cluster)[0]
    absent = next(f"gone{i}" for i in range(100) if cluster.owner_host(f"gone{i}") == HOST_A)
    missing = await client.get(f"/state/keyvalue/{COUNTS}/{absent}")
    assert missing.status_code == 404 and missing.json() == {"error": "key not found", "store": COUNTS, "key": absent}
    rejected = await client.get(f"/state/keyvalue/{IDS}/abc")
    assert rejected.status_code == 400 and rejected.json()["error"] == "invalid key"
    cluster.a.stores_fail = True
    failing = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
    assert failing.status_code == 503 and failing.json()["error"] == "state store not queryable"
    assert failing.headers["retry-after"] == "7" and failing.headers["x-served-by"] == str(HOST_A)
    cluster.a.stores_fail = False
    cluster.rebalance()
    rebalancing = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
    assert rebalancing.status_code == 503 and rebalancing.headers["retry-after"] == "7"
    assert app.paths == []
    assert metrics.registry.get_sample_value("streams_query_responses_total", {"route": ROUTE, "code": "503"}) == 2


async def test_a_forwarded_get_for_a_key_here_is_answered(
    cluster: Cluster, fast: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    client, app, _ = fast
    word = _local_words(cluster)[0]
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}", headers={HOP_HEADER: str(HOST_B)})
    assert answer.status_code == 200 and answer.json()["value"] == WORDS[word]
    assert app.paths == []


def _comparable(answer: httpx.Response) -> tuple[int, bytes, dict[str, Any]]:
    headers = {name: value for name, value in answer.headers.items() if name != "date"}
    return answer.status_code, answer.content, headers


async def test_the_whole_app_answers_alike_with_and_without_the_fast_path(cluster: Cluster, client: httpx.AsyncClient) -> None:
    """`?stale=false` means the same as no parameter but takes the app's route: same bytes, same headers."""
    cluster.a.positions = {0: 5}
    for word in [*WORDS, "no-such-word", "caf\u00e9", "a b"]:
        fast = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
        routed = await client.get(f"/state/keyvalue/{COUNTS}/{word}", params={"stale": "false"})
        assert _comparable(fast) == _comparable(routed), word
    for number in NUMBERS:
        fast = await client.get(f"/state/keyvalue/{IDS}/{number}")
        routed = await client.get(f"/state/keyvalue/{IDS}/{number}", params={"stale": "false"})
        assert _comparable(fast) == _comparable(routed), number


def _remote_words(cluster: Cluster) -> list[str]:
    return [word for word in WORDS if cluster.owner_host(word) == HOST_B]


async def test_a_plain_get_of_a_key_owned_elsewhere_is_relayed_without_the_app(
    cluster: Cluster, forwarding: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    client, app, metrics = forwarding
    remote = _remote_words(cluster)
    for word in remote:
        answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
        assert answer.status_code == 200 and answer.json() == {"key": word, "value": WORDS[word]}
        assert answer.headers["x-served-by"] == str(HOST_B)
    absent = next(f"gone{i}" for i in range(100) if cluster.owner_host(f"gone{i}") == HOST_B)
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{absent}")).status_code == 404, "B's 404 is an answer"
    assert app.paths == []
    sent = cluster.transport.forwarded_to(HOST_B)
    assert [r.url.path for r in sent] == [f"/state/keyvalue/{COUNTS}/{w}" for w in [*remote, absent]]
    assert all(r.headers["x-streams-forwarded-by"] == str(HOST_A) for r in sent)
    forwards = metrics.registry.get_sample_value("streams_query_forwards_total", {"route": ROUTE, "instance": str(HOST_B)})
    assert forwards == len(remote) + 1
    assert metrics.registry.get_sample_value("streams_query_responses_total", {"route": ROUTE, "code": "404"}) == 1


async def test_an_unreachable_owner_answers_503_without_the_app(
    cluster: Cluster, forwarding: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    client, app, _ = forwarding
    cluster.transport.down.add(str(HOST_B))
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{_remote_words(cluster)[0]}")
    assert answer.status_code == 503
    assert answer.json()["error"] == "instance unreachable" and answer.json()["instance"] == str(HOST_B)
    assert answer.headers["retry-after"] == "7" and answer.headers["x-served-by"] == str(HOST_A)
    assert app.paths == []


async def test_a_forwarded_get_for_a_key_elsewhere_is_not_forwarded_again(
    cluster: Cluster, forwarding: tuple[httpx.AsyncClient, _App, StreamsMetrics]
) -> None:
    """One hop at most: an instance that is not the owner of a forwarded key never forwards it again."""
    client, app, _ = forwarding
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{_remote_words(cluster)[0]}", headers={HOP_HEADER: str(HOST_B)})
    assert answer.status_code == 503 and answer.json()["error"] == "not the owner"
    assert app.paths == []
    assert cluster.transport.forwarded_to(HOST_B) == []


async def test_relayed_and_failed_gets_answer_alike_with_and_without_the_fast_path(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    remote = _remote_words(cluster)
    absent = next(f"gone{i}" for i in range(100) if cluster.owner_host(f"gone{i}") == HOST_B)
    odd = next(w for w in (f"caf\u00e9 {i}#?" for i in range(100)) if cluster.owner_host(w) == HOST_B)
    for down in (False, True):
        if down:
            cluster.transport.down.add(str(HOST_B))
        for word in [*remote, absent, odd]:
            fast = await client.get(f"/state/keyvalue/{COUNTS}/{quote(word, safe='')}")
            routed = await client.get(f"/state/keyvalue/{COUNTS}/{quote(word, safe='')}", params={"stale": "false"})
            assert _comparable(fast) == _comparable(routed), (word, down)
            assert fast.status_code == (503 if down else 200 if word in WORDS else 404), (word, down)
