"""GET /state/keyvalues/{store}/all and .../range/{from}/{to}: gathered from every instance, in key order."""

from __future__ import annotations

import httpx

from api.forwarding import HOP_HEADER
from streams_core import Serdes, State
from tests.api.conftest import NUMBERS, WORDS
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, WINDOWED, Cluster


def _by_bytes(keys: list[int]) -> list[int]:
    return sorted(keys, key=lambda k: Serdes.Long().serialize(None, k) or b"")


async def test_all_merges_both_instances_in_key_order(cluster: Cluster, client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalues/{COUNTS}/all")
    assert answer.status_code == 200
    assert answer.json() == [{"key": word, "value": WORDS[word]} for word in sorted(WORDS)]
    assert answer.headers["X-Served-By"] == f"{HOST_A}, {HOST_B}"
    forwarded = cluster.transport.forwarded_to(HOST_B)
    assert [r.url.params["scope"] for r in forwarded] == ["local"]


async def test_all_orders_by_serialized_key_not_by_number(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalues/{IDS}/all")
    keys = [entry["key"] for entry in answer.json()]
    assert keys == _by_bytes(list(NUMBERS))
    assert keys[:4] == [0, 1, 3, 42]


async def test_scope_local_and_forwarded_requests_answer_with_this_instance_only(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    mine = sorted(word for word in WORDS if cluster.owner(word).host == HOST_A)
    local = await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "local"})
    assert [entry["key"] for entry in local.json()] == mine
    assert local.headers["X-Served-By"] == str(HOST_A)
    hop = await client.get(f"/state/keyvalues/{COUNTS}/all", headers={HOP_HEADER: str(HOST_B)})
    assert [entry["key"] for entry in hop.json()] == mine
    assert cluster.transport.forwarded_to(HOST_B) == []


async def test_range_is_inclusive_and_gathered(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalues/{COUNTS}/range/banana/elder")
    assert answer.status_code == 200
    assert [entry["key"] for entry in answer.json()] == ["banana", "cherry", "date", "elder"]
    numbers = await client.get(f"/state/keyvalues/{IDS}/range/1/100")
    assert [entry["key"] for entry in numbers.json()] == [1, 3, 42, 100]


async def test_range_bounds_are_parsed_by_the_key_serde(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/keyvalues/{IDS}/range/one/100")
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid key", "store": IDS, "key": "one", "reason": "Long key: not an integer"}


async def test_one_missing_instance_makes_the_whole_answer_503(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.transport.down.add(str(HOST_B))
    answer = await client.get(f"/state/keyvalues/{COUNTS}/all")
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["instance"] == str(HOST_B)

    cluster.transport.down.clear()
    cluster.b.stores_fail = True
    answer = await client.get(f"/state/keyvalues/{COUNTS}/range/a/z")
    assert answer.status_code == 503
    assert answer.json() == {"error": "instance not queryable", "instance": str(HOST_B), "status": 503}


async def test_all_is_503_while_this_instance_is_not_running(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.state = State.REBALANCING
    answer = await client.get(f"/state/keyvalues/{COUNTS}/all")
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"


async def test_bad_scope_unknown_store_and_window_store_are_rejected(client: httpx.AsyncClient) -> None:
    bad_scope = await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "everywhere"})
    assert bad_scope.status_code == 400
    assert bad_scope.json()["error"] == "invalid request"
    assert bad_scope.json()["problems"][0]["in"] == "query.scope"
    assert (await client.get("/state/keyvalues/nope/all")).status_code == 404
    assert (await client.get(f"/state/keyvalues/{WINDOWED}/range/a/b")).status_code == 404
