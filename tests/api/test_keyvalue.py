"""GET /state/keyvalue/{store}/{key}: local answers, forwarding to the owner, and every error status."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from api.forwarding import HOP_HEADER
from streams_core import State
from tests.api.conftest import WORDS
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, SESSIONS, WINDOWED, Cluster

LOCAL_WORD = "fig"
REMOTE_WORD = "apple"


@pytest.fixture(autouse=True)
def check_placement(cluster: Cluster) -> None:
    assert cluster.owner(LOCAL_WORD).host == HOST_A
    assert cluster.owner(REMOTE_WORD).host == HOST_B


async def test_a_key_owned_here_is_answered_here(cluster: Cluster, client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}")
    assert answer.status_code == 200
    assert answer.json() == {"key": LOCAL_WORD, "value": WORDS[LOCAL_WORD]}
    assert answer.headers["X-Served-By"] == str(HOST_A)
    assert cluster.transport.forwarded_to(HOST_B) == []


async def test_a_key_owned_elsewhere_is_forwarded_once_to_its_owner(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert answer.status_code == 200
    assert answer.json() == {"key": REMOTE_WORD, "value": WORDS[REMOTE_WORD]}
    assert answer.headers["X-Served-By"] == str(HOST_B)
    forwarded = cluster.transport.forwarded_to(HOST_B)
    assert len(forwarded) == 1
    assert forwarded[0].headers[HOP_HEADER] == str(HOST_A)
    assert forwarded[0].url.path == f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}"


async def test_keys_with_reserved_characters_keep_their_encoding_when_forwarded(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    key = next(k for k in ("a b?", "c%d", "é ü", "x#y") if cluster.owner(k).host == HOST_B)
    cluster.put(COUNTS, key, 9)
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{quote(key, safe='')}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"key": key, "value": 9}
    assert answer.headers["X-Served-By"] == str(HOST_B)


async def test_an_absent_key_is_404_from_its_owner(client: httpx.AsyncClient) -> None:
    for word in ("zzz", "aaa"):
        answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}")
        assert answer.status_code == 404
        assert answer.json() == {"error": "key not found", "store": COUNTS, "key": word}


async def test_unknown_store_and_store_of_another_type_are_404(client: httpx.AsyncClient) -> None:
    unknown = await client.get("/state/keyvalue/nope/apple")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown state store"
    for store, kind in ((WINDOWED, "window"), (SESSIONS, "session")):
        answer = await client.get(f"/state/keyvalue/{store}/apple")
        assert answer.status_code == 404
        assert answer.json() == {"error": "not a key-value store", "store": store, "kind": kind}


async def test_long_keys_are_parsed_and_bad_ones_are_400(client: httpx.AsyncClient) -> None:
    for number, name in ((-7, "minus seven"), (100, "c")):
        answer = await client.get(f"/state/keyvalue/{IDS}/{number}")
        assert answer.status_code == 200
        assert answer.json() == {"key": number, "value": name}
    for bad in ("1.5", "ten", "99999999999999999999", " 1"):
        answer = await client.get(f"/state/keyvalue/{IDS}/{bad}")
        assert answer.status_code == 400, bad
        assert answer.json()["error"] == "invalid key"


async def test_a_forwarded_request_is_never_forwarded_again(cluster: Cluster, client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", headers={HOP_HEADER: str(HOST_B)})
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["error"] == "not the owner"
    assert cluster.transport.forwarded_to(HOST_B) == []


async def test_stale_reads_a_local_standby_when_the_owner_is_down(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.transport.down.add(str(HOST_B))
    fresh = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert fresh.status_code == 503
    assert fresh.json() == {"error": "instance unreachable", "instance": str(HOST_B), "reason": "ConnectError"}
    assert fresh.headers["Retry-After"] == "1"

    stale = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"stale": "true"})
    assert stale.status_code == 200
    assert stale.json() == {"key": REMOTE_WORD, "value": WORDS[REMOTE_WORD]}
    assert stale.headers["X-Served-By"] == str(HOST_A)


async def test_stale_answers_while_rebalancing_when_the_metadata_is_known(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    cluster.a.state = State.REBALANCING
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}")).status_code == 503
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}", params={"stale": "true"})
    assert answer.status_code == 200


async def test_503_with_retry_after_while_not_queryable(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.state = State.REBALANCING
    local = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}")
    assert local.status_code == 503
    assert local.headers["Retry-After"] == "1"
    assert local.json()["error"] == "state store not queryable"

    cluster.rebalance()
    routed_by_last_assignment = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert routed_by_last_assignment.status_code == 503
    assert routed_by_last_assignment.headers["X-Served-By"] == str(HOST_B)
    assert routed_by_last_assignment.json()["error"] == "state store not queryable"


async def test_the_owners_503_is_relayed_with_its_retry_after(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.b.stores_fail = True
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert answer.headers["X-Served-By"] == str(HOST_B)
    assert answer.json()["error"] == "state store not queryable"


async def test_an_owner_failing_with_500_becomes_503(
    cluster: Cluster, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cluster.b, "store", broken)
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert answer.status_code == 503
    assert answer.json() == {"error": "instance failed", "instance": str(HOST_B), "status": 500}


async def test_without_application_server_every_answer_is_local() -> None:
    from api import create_app
    from streams_core.runtime.assignment import StreamsMetadataState
    from tests.api.fakes import FakeKafkaStreams

    streams = FakeKafkaStreams(None, {0, 1}, StreamsMetadataState({}, None))
    streams.active_driver.get_key_value_store(COUNTS).put("solo", 1)
    app = create_app(streams)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app)
            async with httpx.AsyncClient(transport=transport, base_url="http://solo") as client:
                answer = await client.get(f"/state/keyvalue/{COUNTS}/solo")
                assert answer.json() == {"key": "solo", "value": 1}
                assert answer.headers["X-Served-By"] == "local"
                everything = await client.get(f"/state/keyvalues/{COUNTS}/all")
                assert everything.json() == [{"key": "solo", "value": 1}]
                streams.state = State.REBALANCING  # every copy here is asked: none may answer, so 503, not "absent"
                assert (await client.get(f"/state/keyvalue/{COUNTS}/solo")).status_code == 503
                assert (await client.get(f"/state/keyvalues/{COUNTS}/all")).status_code == 503
                stale = await client.get(f"/state/keyvalue/{COUNTS}/solo", params={"stale": "true"})
                assert stale.json() == {"key": "solo", "value": 1}
    finally:
        streams.close()
