"""Stale reads that fall back from copy to copy, `maxLag`, read-your-writes `position` bounds,
paged `all`/`range`, the session and global-store routes (issue 14's REST items)."""

from __future__ import annotations

import httpx
import pytest

from streams_core.runtime.queries.state_store_providers import LagInfo
from tests.api.conftest import WORDS
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, SESSIONS, TOPIC, WINDOWED, Cluster

LOCAL_WORD = "fig"  # active on A (partition 0), standby on B
REMOTE_WORD = "apple"  # active on B (partition 1), standby on A


@pytest.fixture(autouse=True)
def check_placement(cluster: Cluster) -> None:
    assert cluster.owner(LOCAL_WORD).host == HOST_A and cluster.owner(REMOTE_WORD).host == HOST_B


async def test_a_stale_read_passes_to_the_next_copy_when_the_first_cannot_answer(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    cluster.a.stores_fail = True  # A (active for LOCAL_WORD) is restoring: B's standby answers
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}", params={"stale": "true"})
    assert (answer.status_code, answer.json()["value"]) == (200, WORDS[LOCAL_WORD])
    assert answer.headers["X-Served-By"] == str(HOST_B)
    plain = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}")
    assert plain.status_code == 503, "a plain read has one candidate: the active copy"


async def test_a_stale_read_through_a_third_party_skips_a_dead_active_host(cluster: Cluster) -> None:
    cluster.transport.down.add(str(HOST_A))
    async with cluster.client(HOST_B) as client:
        # B holds the standby of LOCAL_WORD: asked there, it answers at once without trying A.
        answer = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}", params={"stale": "true"})
        assert (answer.status_code, answer.headers["X-Served-By"]) == (200, str(HOST_B))
        plain = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}")
        assert plain.status_code == 503 and plain.json()["error"] == "instance unreachable"


async def test_max_lag_bounds_which_copies_may_answer(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.lags = {COUNTS: {1: LagInfo(40, 45, 5)}}  # A's standby of REMOTE_WORD's partition
    within = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"maxLag": "5"})
    assert (within.status_code, within.headers["X-Served-By"]) == (200, str(HOST_A)), "a local copy within the bound"
    too_far = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"maxLag": "4"})
    assert (too_far.status_code, too_far.headers["X-Served-By"]) == (200, str(HOST_B)), "passed on to the active copy"
    cluster.transport.down.add(str(HOST_B))
    none_left = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"maxLag": "4"})
    assert none_left.status_code == 503, "no copy within the bound: never an answer from a copy too far behind"


async def test_answers_carry_the_position_and_a_position_bound_waits_for_it(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    cluster.b.positions[1] = 7
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}")
    assert answer.headers["X-Streams-Position"] == f"{TOPIC}:1:7", "relayed from the owner"
    reached = await client.get(f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"position": f"{TOPIC}:1:7"})
    assert (reached.status_code, reached.json()["value"]) == (200, WORDS[REMOTE_WORD])
    other_partition = await client.get(
        f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"position": f"{TOPIC}:0:99,{TOPIC}:1:3"}
    )
    assert other_partition.status_code == 200, "only the key's partition counts (Kafka's PositionBound)"
    behind = await client.get(
        f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"position": f"{TOPIC}:1:8", "timeoutMs": "30"}
    )
    assert behind.status_code == 503
    assert behind.json()["error"] == "position not reached" and behind.json()["position"] == f"{TOPIC}:1:7"
    stale = await client.get(
        f"/state/keyvalue/{COUNTS}/{REMOTE_WORD}", params={"position": f"{TOPIC}:1:8", "stale": "true", "timeoutMs": "0"}
    )
    assert stale.status_code == 503, "a standby copy has no input position: it never answers a bounded query"


@pytest.mark.parametrize("token", ["words", "words:1", "words:x:3", "a b:1:2", "words:1:2,"])
async def test_a_malformed_position_is_400(client: httpx.AsyncClient, token: str) -> None:
    answer = await client.get(f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}", params={"position": token})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid position"


@pytest.mark.parametrize("path", [f"/state/keyvalues/{COUNTS}/all", f"/state/keyvalues/{COUNTS}/range/b/g"])
@pytest.mark.parametrize("limit", [1, 2, 3, 100])
async def test_pages_follow_each_other_to_the_whole_answer(client: httpx.AsyncClient, path: str, limit: int) -> None:
    whole = (await client.get(path)).json()
    assert "X-Next-After" not in (await client.get(path)).headers
    pages: list[list[dict[str, object]]] = []
    params: dict[str, str] = {"limit": str(limit)}
    while True:
        answer = await client.get(path, params=params)
        assert answer.status_code == 200
        pages.append(answer.json())
        assert len(pages[-1]) <= limit
        cursor = answer.headers.get("X-Next-After")
        if cursor is None:
            break
        assert cursor == pages[-1][-1]["key"]
        params = {"limit": str(limit), "after": cursor}
    assert [entry for page in pages for entry in page] == whole
    assert len(whole) > 1 and all(pages[:-1])


async def test_a_page_of_long_keys_after_a_cursor(client: httpx.AsyncClient) -> None:
    """Serialized (big-endian two's complement) order: 0 1 3 42 100 -7 -5 -1."""
    answer = await client.get(f"/state/keyvalues/{IDS}/all", params={"limit": "2", "after": "1"})
    assert [e["key"] for e in answer.json()] == [3, 42]
    assert answer.headers["X-Next-After"] == "42"
    last = await client.get(f"/state/keyvalues/{IDS}/all", params={"limit": "2", "after": "-5"})
    assert [e["key"] for e in last.json()] == [-1] and "X-Next-After" not in last.headers
    bad = await client.get(f"/state/keyvalues/{IDS}/all", params={"after": "five"})
    assert bad.status_code == 400


async def test_the_session_route_answers_from_the_keys_copy(cluster: Cluster, client: httpx.AsyncClient) -> None:
    for word, start, end, count in ((REMOTE_WORD, 1_000, 5_000, 3), (REMOTE_WORD, 90_000, 90_000, 1), (LOCAL_WORD, 0, 10, 2)):
        for driver in cluster._copies(word, None):
            driver.get_session_store(SESSIONS).put(_windowed(word, start, end), count)
    answer = await client.get(f"/state/session/{SESSIONS}/{REMOTE_WORD}")
    assert answer.status_code == 200 and answer.headers["X-Served-By"] == str(HOST_B)
    assert answer.json() == [
        {"key": REMOTE_WORD, "windowStart": 1_000, "windowEnd": 5_000, "value": 3},
        {"key": REMOTE_WORD, "windowStart": 90_000, "windowEnd": 90_000, "value": 1},
    ]
    assert (await client.get(f"/state/session/{SESSIONS}/kiwi")).json() == []
    assert (await client.get(f"/state/session/{WINDOWED}/kiwi")).status_code == 404


async def test_the_global_route_refuses_a_store_that_is_not_global(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/global/{COUNTS}/{LOCAL_WORD}")
    assert answer.status_code == 404 and answer.json()["error"] == "not a global store"


def _windowed(key: str, start: int, end: int) -> object:
    from streams_core.state.windowed import SessionWindow, Windowed

    return Windowed(key, SessionWindow(start, end))
