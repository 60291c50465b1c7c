"""/health, /ready and /metrics."""

from __future__ import annotations

import httpx
import pytest

from streams_core import State
from streams_core.runtime.kafka_streams import LagInfo
from tests.api.fakes import COUNTS, Cluster


async def test_health_and_ready_while_running(client: httpx.AsyncClient) -> None:
    for path in ("/health", "/ready"):
        answer = await client.get(path)
        assert answer.status_code == 200
        assert answer.json() == {"status": "UP", "state": "RUNNING"}


@pytest.mark.parametrize(
    ("state", "health", "ready"),
    [
        (State.CREATED, 200, 503),
        (State.REBALANCING, 200, 503),
        (State.PENDING_SHUTDOWN, 200, 503),
        (State.PENDING_ERROR, 503, 503),
        (State.ERROR, 503, 503),
    ],
)
async def test_probes_by_state(
    cluster: Cluster, client: httpx.AsyncClient, state: State, health: int, ready: int
) -> None:
    cluster.a.state = state
    live, readiness = await client.get("/health"), await client.get("/ready")
    assert (live.status_code, readiness.status_code) == (health, ready)
    assert readiness.json() == {"status": "DOWN", "state": state.name}
    assert readiness.headers["Retry-After"] == "1"


def _samples(text: str) -> dict[str, float]:
    lines = (line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, value in lines}


async def test_metrics_in_prometheus_text(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.lags = {COUNTS: {0: LagInfo(40, 50, 10)}}
    await client.get(f"/state/keyvalue/{COUNTS}/fig")
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(answer.text)
    assert samples['streams_state{state="RUNNING"}'] == 1
    assert samples['streams_state{state="REBALANCING"}'] == 0
    assert samples["streams_processed_records_total"] == 120
    assert samples["streams_process_rate"] > 0
    assert samples["streams_commit_latency_ms_avg"] == 2.5
    assert samples["streams_restored_records_total"] == 7
    assert samples['streams_store_lag{store="counts",partition="0"}'] == 10
    assert samples['streams_store_offset{store="counts",partition="0"}'] == 40
    route = 'route="/state/keyvalue/{store}/{key}"'
    assert samples[f"streams_query_latency_seconds_count{{{route}}}"] == 1
    assert samples[f'streams_query_latency_seconds_bucket{{{route},le="+Inf"}}'] == 1
    assert "# TYPE streams_query_latency_seconds histogram" in answer.text


async def test_metrics_leave_out_lags_before_start(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.state = State.CREATED
    cluster.a.lags = {COUNTS: {0: LagInfo(40, 50, 10)}}
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert "streams_store_lag{" not in answer.text
    assert _samples(answer.text)['streams_state{state="CREATED"}'] == 1
