"""Fixtures of the REST layer's tests: a populated two-instance cluster, a client of instance A,
and the same cluster in the conditions the conformance tests query it in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from api import Credentials
from streams_core import Serdes, State
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, Cluster
from tests.api.secured import ENTRIES, STORE_TOKEN

WORDS = {"apple": 5, "banana": 6, "cherry": 6, "date": 4, "elder": 5, "fig": 3, "grape": 5}
NUMBERS = {-7: "minus seven", -5: "minus five", -1: "minus one", 0: "zero", 1: "one", 3: "three", 42: "x", 100: "c"}
WINDOWS = {"apple": [(0, 3), (60_000, 5), (120_000, 1)], "fig": [(60_000, 2)]}


def populate(cluster: Cluster) -> None:
    """The same data on every run: words, numbers (Long keys) and windowed counts."""
    for word, count in WORDS.items():
        cluster.put(COUNTS, word, count)
    for number, name in NUMBERS.items():
        cluster.put(IDS, number, name, Serdes.Long())
    for word, windows in WINDOWS.items():
        for start, count in windows:
            cluster.put_window(word, count, start)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    populate(cluster)
    try:
        async with cluster.running():
            yield cluster
    finally:
        cluster.close()


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    """A client of instance A."""
    async with cluster.client(HOST_A) as client:
        yield client


def _rebalancing(cluster: Cluster) -> None:
    cluster.rebalance()


def _restoring(cluster: Cluster) -> None:
    cluster.a.stores_fail = cluster.b.stores_fail = True


def _peer_down(cluster: Cluster) -> None:
    cluster.transport.down.add(str(HOST_B))


def _not_started(cluster: Cluster) -> None:
    cluster.a.state = State.CREATED


def _forbidden(cluster: Cluster) -> None:
    cluster.headers["Authorization"] = f"Bearer {STORE_TOKEN}"


CONDITIONS: dict[str, Callable[[Cluster], None]] = {
    "running": lambda cluster: None,
    "unauthenticated": lambda cluster: None,
    "forbidden": _forbidden,
    "rebalancing": _rebalancing,
    "restoring": _restoring,
    "peer-down": _peer_down,
    "not-started": _not_started,
}
"""States of the cluster that the conformance tests query instance A in."""
SECURED = {"unauthenticated", "forbidden"}
"""The conditions of a cluster that requires credentials (tests/api/secured.py's principals)."""


@pytest.fixture(scope="module", params=list(CONDITIONS))
def live(request: pytest.FixtureRequest) -> Iterator[tuple[Cluster, asyncio.Runner]]:
    """A populated cluster in one condition, its apps' lifespans running on a private loop.

    Synchronous (module-scoped, for Hypothesis): tests send requests with `runner.run(...)`.
    """
    secured: dict[str, Any] = {"credentials": Credentials.from_mapping(ENTRIES), "principal": "instances"}
    cluster = Cluster(**secured) if request.param in SECURED else Cluster()
    populate(cluster)
    CONDITIONS[request.param](cluster)
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        lifespans = cluster.running()
        runner.run(lifespans.__aenter__())
        try:
            yield cluster, runner
        finally:
            runner.run(lifespans.__aexit__(None, None, None))
            cluster.close()
