"""Authentication of the REST layer (api/auth.py), in process: who is let in, who is refused and how,
and that forwarded queries carry the instance's own credentials, not the client's."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from api import ApiSettings, Credentials
from api.auth import AuthMiddleware, store_of
from tests.api.conftest import WORDS, populate
from tests.api.contract import load_contract
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, SESSIONS, WINDOWED, Cluster
from tests.api.secured import (
    CLIENT_TOKEN,
    ENTRIES,
    INSTANCE_TOKEN,
    SECRET_FORMS,
    STORE_TOKEN,
    USER_PASSWORD,
    basic,
    credentials,
)

BEARER = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
WRONG = {
    "none": {},
    "wrong token": {"Authorization": "Bearer not-the-token"},
    "token of another case": {"Authorization": f"Bearer {CLIENT_TOKEN.upper()}"},
    "wrong password": {"Authorization": basic("dashboard", USER_PASSWORD + "x")},
    "token as a password": {"Authorization": basic("client", CLIENT_TOKEN)},
    "unknown user": {"Authorization": basic("nobody", USER_PASSWORD)},
    "malformed basic": {"Authorization": "Basic !!!not-base64"},
    "no colon": {"Authorization": "Basic ZGFzaGJvYXJk"},
    "empty bearer": {"Authorization": "Bearer "},
    "other scheme": {"Authorization": f"Digest {CLIENT_TOKEN}"},
    "bare token": {"Authorization": CLIENT_TOKEN},
}
"""Requests a secured server must refuse with 401."""


def _secured(**options: Any) -> Cluster:
    cluster = Cluster(credentials=Credentials.from_mapping(ENTRIES), principal="instances", **options)
    populate(cluster)
    return cluster


@pytest.fixture
async def secured() -> AsyncIterator[Cluster]:
    cluster = _secured()
    try:
        async with cluster.running():
            yield cluster
    finally:
        cluster.close()


def _every_route() -> list[str]:
    """Every operation of openapi.yaml with sample parameters (a key owned by either instance)."""
    samples = {"store": COUNTS, "key": "apple", "from": "0", "to": "100000", "instance": str(HOST_B)}
    stores = {"windowed": WINDOWED, "session": SESSIONS, "global": COUNTS}
    routes = []
    for template in load_contract()["paths"]:
        kind = template.split("/")[2] if template.startswith("/state/") else ""
        routes.append(template.format_map({**samples, "store": stores.get(kind, COUNTS)}))
    return [*routes, "/openapi.json", "/docs", "/nope"]


ROUTES = _every_route()


@pytest.mark.parametrize("how", list(WRONG))
async def test_every_route_refuses_missing_or_wrong_credentials_with_401(secured: Cluster, how: str) -> None:
    for entry in (HOST_A, HOST_B):
        async with secured.client(entry) as client:
            for route in ROUTES:
                if route in ("/health", "/ready"):
                    continue
                answer = await client.get(route, headers=WRONG[how])
                assert answer.status_code == 401, (route, answer.text)
                assert answer.json()["error"] == "unauthorized" and answer.json()["reason"], answer.text
                challenges = answer.headers.get_list("www-authenticate")
                assert [c.split()[0] for c in challenges] == ["Bearer", "Basic"], challenges
                assert "apple" not in answer.text and "x-served-by" not in answer.headers
    # nothing was forwarded for a refused request
    assert secured.transport.forwarded_to(HOST_A) == secured.transport.forwarded_to(HOST_B) == []


async def test_a_token_or_a_password_lets_in_on_every_route_through_either_instance(secured: Cluster) -> None:
    for headers in (BEARER, {"Authorization": basic("dashboard", USER_PASSWORD)}):
        for entry in (HOST_A, HOST_B):
            async with secured.client(entry) as client:
                for word, count in WORDS.items():
                    answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}", headers=headers)
                    assert answer.status_code == 200 and answer.json()["value"] == count, answer.text
                everything = await client.get(f"/state/keyvalues/{COUNTS}/all", headers=headers)
                assert {e["key"]: e["value"] for e in everything.json()} == WORDS
                for route in ROUTES:
                    answer = await client.get(route, headers=headers)
                    assert answer.status_code not in (401, 403) and answer.status_code < 500, (route, answer.text)


async def test_forwarded_queries_carry_the_instance_credentials_not_the_client_ones(secured: Cluster) -> None:
    secured.transport.requests.clear()
    async with secured.client(HOST_A) as client:
        for word in WORDS:
            answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}", headers={"Authorization": basic("dashboard", USER_PASSWORD)})
            assert answer.status_code == 200, answer.text
        assert (await client.get(f"/state/keyvalues/{COUNTS}/all", headers=BEARER)).status_code == 200
        assert (await client.get(f"/metrics/{HOST_B}", headers=BEARER)).status_code == 200
    hops = secured.transport.forwarded_to(HOST_B)
    assert len(hops) >= 3
    assert {r.headers["authorization"] for r in hops} == {f"Bearer {INSTANCE_TOKEN}"}


async def test_a_forged_forward_without_credentials_is_refused(secured: Cluster) -> None:
    async with secured.client(HOST_B) as client:
        answer = await client.get(f"/state/keyvalue/{COUNTS}/apple", headers={"X-Streams-Forwarded-By": str(HOST_A)})
    assert answer.status_code == 401 and "value" not in answer.json()


async def test_an_instance_whose_credentials_the_peer_refuses_answers_503_not_401() -> None:
    """The client's credentials were good: the owner refused the instance's, so 401 would mislead the client."""
    cluster = _secured()
    refusing = Credentials.from_mapping({k: v for k, v in ENTRIES.items() if k != "instances"})
    auth = next(m for m in cluster.app[HOST_B].user_middleware if cast(Any, m.cls) is AuthMiddleware)
    auth.kwargs["credentials"] = refusing  # B accepts the clients but not A (its stack is built on the first request)
    try:
        async with cluster.running(), cluster.client(HOST_A) as client:
            answers = [await client.get(f"/state/keyvalue/{COUNTS}/{word}", headers=BEARER) for word in WORDS]
        remote = [a for a in answers if a.status_code != 200]
        assert remote and {a.status_code for a in remote} == {503}
        assert {a.json()["error"] for a in remote} == {"instance refused the forwarded query"}
    finally:
        cluster.close()


async def test_a_principal_limited_to_some_stores_gets_403_on_the_others(secured: Cluster) -> None:
    limited = {"Authorization": f"Bearer {STORE_TOKEN}"}
    async with secured.client(HOST_A) as client:
        for route in (f"/state/keyvalue/{COUNTS}/apple", f"/state/keyvalues/{COUNTS}/all", f"/state/instances/{COUNTS}",
                      f"/state/instance/{COUNTS}/apple", f"/state/windowed/{WINDOWED}/apple/0/1", f"/state/keyvalue/{COUNTS}/apple/"):
            answer = await client.get(route, headers=limited)
            assert answer.status_code == 403, (route, answer.text)
            assert answer.json() == {
                "error": "forbidden",
                "reason": "the principal may not query this store",
                "principal": "ids-reader",
                "store": route.split("/")[3],
            }
        assert (await client.get(f"/state/keyvalue/{IDS}/42", headers=limited)).json()["value"] == "x"
        assert (await client.get("/state/instances", headers=limited)).status_code == 200


@pytest.mark.parametrize(("path", "store"), [
    ("/state/keyvalue/counts/a", "counts"), ("/state/keyvalues/counts/all", "counts"), ("/state/instances/x", "x"),
    ("/state/instances", None), ("/state/lags", None), ("/state/keyvalue/", None), ("/metrics/counts", None),
    ("/topology", None), ("/state/other/counts/a", None),
])  # fmt: skip
def test_store_of_reads_the_store_as_the_router_does(path: str, store: str | None) -> None:
    assert store_of(path) == store


async def test_probes_and_the_dashboard_page_are_open_unless_told(secured: Cluster) -> None:
    async with secured.client(HOST_A) as client:
        for path in ("/health", "/ready", "/health/", "/ui", "/ui/static/dashboard.js"):
            assert (await client.get(path)).status_code == 200, path
        assert (await client.get("/ui/static/nope.js")).status_code == 404
        assert (await client.get("/metrics")).status_code == 401
    closed = _secured(open_probes=False)
    try:
        async with closed.running(), closed.client(HOST_A) as client:
            for path in ("/health", "/ready"):
                assert (await client.get(path)).status_code == 401
                assert (await client.get(path, headers=BEARER)).status_code == 200
    finally:
        closed.close()


def test_the_dashboard_sends_its_credentials() -> None:
    """The page's fetches carry the token it was given (and the browser's Basic credentials, same-origin):
    its one `fetch` is in `authorized`, which adds the token; no other call reaches the network."""
    from api.routes.ui import STATIC_DIR

    script = (STATIC_DIR / "dashboard.js").read_text(encoding="utf-8")
    assert script.count("fetch(") == 1 and "XMLHttpRequest" not in script and "EventSource" not in script
    body = script.split("function authorized(", 1)[1].split("\n}\n", 1)[0]
    assert "fetch(" in body and '"Authorization"' in body and 'credentials: "same-origin"' in body


def test_a_credentials_file_is_read_and_its_errors_name_no_secret(tmp_path: Path) -> None:
    loaded, path = credentials(tmp_path)
    assert sorted(loaded.principals) == sorted(ENTRIES)
    assert loaded.principals["ids-reader"].stores == frozenset({IDS})
    bad = {
        "not json": "{",
        "a list": "[]",
        "no secret": '{"x": {}}',
        "empty token": '{"x": {"token": ""}}',
        "unknown field": f'{{"x": {{"token": "{CLIENT_TOKEN}", "tokne": "{CLIENT_TOKEN}"}}}}',
        "stores not a list": f'{{"x": {{"token": "{CLIENT_TOKEN}", "stores": "counts"}}}}',
        "shared token": f'{{"x": {{"token": "{CLIENT_TOKEN}"}}, "y": {{"token": "{CLIENT_TOKEN}"}}}}',
        "colon in name": f'{{"a:b": {{"password": "{USER_PASSWORD}"}}}}',
    }
    for what, text in bad.items():
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as caught:
            Credentials.load(path)
        assert CLIENT_TOKEN not in str(caught.value) and USER_PASSWORD not in str(caught.value), what


def test_a_principal_named_for_forwarding_must_exist() -> None:
    with pytest.raises(ValueError, match="not in the credentials"):
        ApiSettings(credentials=Credentials.from_mapping(ENTRIES), principal="ghost")


async def test_no_secret_in_logs_metrics_reprs_or_answers(caplog: pytest.LogCaptureFixture) -> None:
    """Requests with right and wrong credentials, forwarded and not, logged at DEBUG: no secret anywhere."""
    cluster = _secured()
    texts: list[str] = [repr(cluster.settings), repr(cluster.settings.credentials)]
    texts += [repr(p) for p in cluster.settings.credentials.principals.values()]  # type: ignore[union-attr]
    caplog.set_level(logging.DEBUG)
    try:
        async with cluster.running():
            texts.append(repr(cluster.app[HOST_A].state.forwarder))
            for entry in (HOST_A, HOST_B):
                async with cluster.client(entry) as client:
                    for headers in (BEARER, {"Authorization": basic("dashboard", USER_PASSWORD)}, *WRONG.values()):
                        for route in ROUTES:
                            answer = await client.get(route, headers=headers)
                            texts.append(f"{answer.headers} {answer.text}")
                    texts.append((await client.get("/metrics", headers=BEARER)).text)
            cluster.transport.down.add(str(HOST_B))  # forwarding failures are logged too
            async with cluster.client(HOST_A) as client:
                for word in WORDS:
                    texts.append((await client.get(f"/state/keyvalue/{COUNTS}/{word}", headers=BEARER)).text)
    finally:
        cluster.close()
    texts += [record.getMessage() + repr(record.args) + (record.exc_text or "") for record in caplog.records]
    assert len(caplog.records) > 10
    everything = "\n".join(texts)
    assert "unauthorized" in everything and "apple" in everything  # the texts were captured
    for secret in SECRET_FORMS:
        assert secret not in everything, "a secret leaked"


async def test_an_open_server_needs_no_credentials(cluster: Cluster, client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalue/{COUNTS}/apple")
    assert answer.status_code == 200 and answer.json()["value"] == WORDS["apple"]
