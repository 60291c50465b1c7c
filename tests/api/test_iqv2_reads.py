"""The REST layer's reads are IQv2 queries: each failure reason's answer, and a failure seen through the routes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from api.errors import exception_response
from api.reads import failure_error
from streams_core.errors import InvalidStateStoreError
from streams_core.query import FailureReason, Position, PositionBound, QueryResult
from streams_core.query.internals import store_query_utils
from streams_core.query.internals.store_query_utils import UnknownQueryTypeError
from streams_core.runtime.queries.store_host import StoreQueryTimeoutError
from tests.api.conftest import WORDS
from tests.api.fakes import COUNTS, HOST_A, SESSIONS, WINDOWED, Cluster

LOCAL_WORD = "fig"


def _answer(result: QueryResult[Any]) -> tuple[int, dict[str, Any]]:
    error = failure_error(result, COUNTS)
    response = exception_response(error, 1)
    if response is None:  # not an answer of the query path: the app's 500 handler answers it
        return 500, {"raised": type(error).__name__}
    return response.status_code, json.loads(bytes(response.body))


@pytest.mark.parametrize(
    ("reason", "status", "error"),
    [
        (FailureReason.NOT_ACTIVE, 503, "state store not queryable"),
        (FailureReason.NOT_PRESENT, 503, "state store not queryable"),
        (FailureReason.DOES_NOT_EXIST, 503, "state store not queryable"),
        (FailureReason.NOT_UP_TO_BOUND, 503, "position not reached"),
        (FailureReason.UNKNOWN_QUERY_TYPE, 404, "store does not answer this query"),
    ],
)
def test_each_failure_reason_has_its_answer(reason: FailureReason, status: int, error: str) -> None:
    status_code, body = _answer(QueryResult.for_failure(reason, "why"))
    assert (status_code, body["error"]) == (status, error)
    assert body.get("reason") == "why"


def test_a_store_exception_is_503_when_the_host_did_not_answer_and_500_when_the_store_raised() -> None:
    late = QueryResult(None, FailureReason.STORE_EXCEPTION, "partition 0: w-1 did not answer", _cause=StoreQueryTimeoutError("w-1", 5.0))
    assert _answer(late) == (503, {"error": "state store not queryable", "reason": "partition 0: w-1 did not answer"})
    gone = QueryResult(None, FailureReason.STORE_EXCEPTION, "partition 0: gone", _cause=InvalidStateStoreError("w-1 is gone"))
    assert _answer(gone)[0] == 503
    broken = QueryResult(None, FailureReason.STORE_EXCEPTION, "partition 0: KeyError: 'x'", _cause=KeyError("x"))
    assert _answer(broken) == (500, {"raised": "KeyError"})


def test_a_not_up_to_bound_failure_carries_the_position_reached() -> None:
    reached = Position.from_map({"words": {0: 3}})
    failed: QueryResult[int] = QueryResult.not_up_to_bound(reached, PositionBound.at(Position.from_map({"words": {0: 7}})), 0)
    assert failed.get_failure_reason() is FailureReason.NOT_UP_TO_BOUND and failed.get_position() == reached


@pytest.mark.parametrize(
    "path",
    [f"/state/keyvalue/{COUNTS}/{LOCAL_WORD}", f"/state/windowed/{WINDOWED}/{LOCAL_WORD}/0/120000", f"/state/session/{SESSIONS}/{LOCAL_WORD}"],
)
async def test_a_store_that_does_not_know_the_query_is_404_and_one_that_raises_is_500(
    cluster: Cluster, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The routes' reads run the IQv2 query on the copy (`store_query_utils.run_query`), so what it raises is
    the failure reason the answer comes from."""
    assert cluster.owner_host(LOCAL_WORD) == HOST_A

    def unknown(store: Any, query: Any) -> Any:
        raise UnknownQueryTypeError(f"{type(store).__name__} does not know {query!r}")

    monkeypatch.setattr(store_query_utils, "run_query", unknown)
    answer = await client.get(path)
    assert answer.status_code == 404 and answer.json()["error"] == "store does not answer this query"

    def broken(store: Any, query: Any) -> Any:
        raise KeyError("corrupt")

    monkeypatch.setattr(store_query_utils, "run_query", broken)
    answer = await client.get(path)
    assert answer.status_code == 500 and answer.json() == {"error": "internal error", "reason": "KeyError"}


async def test_scans_are_whole_or_503(cluster: Cluster, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan's partitions are asked as one IQv2 request; one that fails fails the page (never a partial list)."""
    local = await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "local"})
    assert local.status_code == 200 and {e["key"] for e in local.json()} < set(WORDS)
    real = store_query_utils.run_query

    def refusing(store: Any, query: Any) -> Any:
        raise InvalidStateStoreError("closed meanwhile")

    monkeypatch.setattr(store_query_utils, "run_query", refusing)
    refused = await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "local"})
    assert refused.status_code == 503 and refused.json()["error"] == "state store not queryable"
    assert "closed meanwhile" in refused.json()["reason"]
    monkeypatch.setattr(store_query_utils, "run_query", real)
    assert (await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "local"})).json() == local.json()
