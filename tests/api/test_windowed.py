"""GET /state/windowed/{store}/{key}/{from}/{to}: a key's windows, from its owner."""

from __future__ import annotations

import httpx

from tests.api.fakes import COUNTS, HOST_A, HOST_B, WINDOW_SIZE, WINDOWED, Cluster


async def test_windows_of_a_remote_key_come_from_its_owner(cluster: Cluster, client: httpx.AsyncClient) -> None:
    assert cluster.owner("apple").host == HOST_B
    answer = await client.get(f"/state/windowed/{WINDOWED}/apple/0/120000")
    assert answer.status_code == 200
    assert answer.headers["X-Served-By"] == str(HOST_B)
    assert answer.json() == [
        {"key": "apple", "windowStart": start, "windowEnd": start + WINDOW_SIZE, "value": value}
        for start, value in ((0, 3), (60_000, 5), (120_000, 1))
    ]


async def test_the_time_range_applies_to_window_starts_inclusively(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/windowed/{WINDOWED}/apple/60000/60000")
    assert [w["windowStart"] for w in answer.json()] == [60_000]
    assert (await client.get(f"/state/windowed/{WINDOWED}/apple/130000/999999")).json() == []


async def test_a_local_key_and_an_unknown_key(cluster: Cluster, client: httpx.AsyncClient) -> None:
    assert cluster.owner("fig").host == HOST_A
    local = await client.get(f"/state/windowed/{WINDOWED}/fig/0/100000")
    assert local.headers["X-Served-By"] == str(HOST_A)
    assert local.json() == [{"key": "fig", "windowStart": 60_000, "windowEnd": 120_000, "value": 2}]
    assert (await client.get(f"/state/windowed/{WINDOWED}/kiwi/0/100000")).json() == []


async def test_stale_windows_from_a_standby(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.transport.down.add(str(HOST_B))
    assert (await client.get(f"/state/windowed/{WINDOWED}/apple/0/0")).status_code == 503
    stale = await client.get(f"/state/windowed/{WINDOWED}/apple/0/0", params={"stale": "true"})
    assert stale.status_code == 200
    assert stale.json()[0]["value"] == 3
    assert stale.headers["X-Served-By"] == str(HOST_A)


async def test_bad_times_are_400_and_a_key_value_store_is_404(client: httpx.AsyncClient) -> None:
    for times in ("-1/10", "a/10", "0/1.5", f"0/{2**63}"):
        answer = await client.get(f"/state/windowed/{WINDOWED}/apple/{times}")
        assert answer.status_code == 400, times
        assert answer.json()["error"] == "invalid request"
    wrong = await client.get(f"/state/windowed/{COUNTS}/apple/0/10")
    assert wrong.status_code == 404
    assert wrong.json() == {"error": "not a window store", "store": COUNTS, "kind": "key-value"}
