"""/health, /ready and /metrics."""

from __future__ import annotations

import platform
import sys

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams_core import State
from streams_core.runtime.kafka_streams import LagInfo
from tests.api.conftest import WORDS
from tests.api.fakes import COUNTS, HOST_B, Cluster


async def test_health_and_ready_while_running(client: httpx.AsyncClient) -> None:
    for path in ("/health", "/ready"):
        answer = await client.get(path)
        assert answer.status_code == 200
        assert answer.json() == {"status": "UP", "state": "RUNNING", "degradedThreads": []}


class _Host:
    """A store host as the probes see it: its name, how long it left a query unanswered, its pings."""

    def __init__(self, name: str, unanswered_for: float) -> None:
        self.host_name = name
        self.waited = unanswered_for
        self.probes = 0

    def unanswered_for(self) -> float:
        return self.waited

    def probe(self) -> None:
        self.probes += 1


async def test_probes_list_a_stalled_worker_without_waiting_for_it(
    cluster: Cluster, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that left a query unanswered past the query deadline is a degraded thread; the probe stays
    UP (a liveness probe must not restart the instance for it) and pings only the workers that answer."""
    stalled, answering = _Host("app-StreamThread-1", 7.25), _Host("app-StreamThread-2", 0.0)
    monkeypatch.setattr(cluster.a.store_queries, "hosts", lambda: [stalled, answering])
    for path in ("/health", "/ready"):
        answer = await client.get(path)
        assert answer.status_code == 200
        assert answer.json() == {
            "status": "UP",
            "state": "RUNNING",
            "degradedThreads": [{"thread": "app-StreamThread-1", "unansweredMs": 7250}],
        }
    assert (stalled.probes, answering.probes) == (0, 2)
    stalled.waited = 4.0  # under the 5 s deadline: waiting, not yet degraded
    assert (await client.get("/health")).json()["degradedThreads"] == []


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
    assert readiness.json() == {"status": "DOWN", "state": state.name, "degradedThreads": []}
    assert readiness.headers["Retry-After"] == "1"


def _samples(text: str) -> dict[str, float]:
    """Sample values by `name{labels}`, labels sorted by name (as prometheus-client writes them)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{name}="{value}"' for name, value in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


async def test_metrics_in_prometheus_text(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.lags = {COUNTS: {0: LagInfo(40, 50, 10)}}
    await client.get(f"/state/keyvalue/{COUNTS}/fig")
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(answer.text)
    assert samples['streams_state{state="RUNNING"}'] == 1
    assert samples['streams_state{state="REBALANCING"}'] == 0
    thread = 'thread="t-1"'
    assert samples[f"streams_thread_process_records_total{{{thread}}}"] == 120
    assert samples[f"streams_thread_process_latency_seconds_sum{{{thread}}}"] == pytest.approx(0.24)
    assert samples[f"streams_thread_commit_latency_seconds_count{{{thread}}}"] == 4
    assert samples[f"streams_thread_commit_latency_seconds_sum{{{thread}}}"] == pytest.approx(0.01)
    assert samples[f"streams_thread_poll_latency_seconds_sum{{{thread}}}"] == pytest.approx(0.05)
    assert samples[f"streams_thread_restored_records_total{{{thread}}}"] == 7
    assert samples[f"streams_cache_hit_ratio{{{thread}}}"] == 0.75
    assert samples[f"streams_cache_evictions_total{{{thread}}}"] == 2
    assert samples[f'streams_thread_tasks{{kind="active",{thread}}}'] == 1
    assert samples[f'streams_task_dropped_records_total{{task="0_0",{thread}}}'] == 1
    partition = f'partition="0",task="0_0",{thread},topic="words"'
    assert samples[f"streams_partition_records_lag{{{partition}}}"] == 9
    assert samples[f"streams_partition_paused{{{partition}}}"] == 1
    assert samples[f"streams_partition_skipped_records_total{{{partition}}}"] == 1
    assert samples['streams_store_lag_records{partition="0",store="counts"}'] == 10
    assert samples['streams_store_offset{partition="0",store="counts"}'] == 40
    route = 'route="/state/keyvalue/{store}/{key}"'
    assert samples[f"streams_query_duration_seconds_count{{{route}}}"] == 1
    assert samples[f'streams_query_duration_seconds_bucket{{le="+Inf",{route}}}'] == 1
    assert samples[f'streams_query_responses_total{{code="200",{route}}}'] == 1
    assert "# TYPE streams_query_duration_seconds histogram" in answer.text


async def test_metrics_carry_the_process_and_python_collectors(client: httpx.AsyncClient) -> None:
    """prometheus-client's default collectors, as any Python service exposes them, with live values."""
    answer = await client.get("/metrics")
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    samples = _samples(answer.text)
    assert samples["process_cpu_seconds_total"] > 0
    assert samples["process_resident_memory_bytes"] > 1024 * 1024
    assert samples["process_open_fds"] >= 3
    assert samples["process_start_time_seconds"] > 0
    info = families["python_info"].samples[0]
    assert info.value == 1 and info.labels["major"] == str(sys.version_info.major)
    assert info.labels["implementation"] == platform.python_implementation()
    for name in ("python_gc_objects_collected", "python_gc_collections"):
        assert families[name].type == "counter"
        assert {s.labels["generation"] for s in families[name].samples} == {"0", "1", "2"}


async def test_metrics_count_forwards_and_503s(cluster: Cluster, client: httpx.AsyncClient) -> None:
    """A key owned by B is forwarded from A; a store that fails while restoring answers 503."""
    owned_by_b = next(word for word in WORDS if cluster.owner_host(word) == HOST_B)
    assert (await client.get(f"/state/keyvalue/{COUNTS}/{owned_by_b}")).status_code == 200
    cluster.a.stores_fail = cluster.b.stores_fail = True
    assert (await client.get(f"/state/keyvalue/{COUNTS}/fig")).status_code == 503
    samples = _samples((await client.get("/metrics")).text)
    route = 'route="/state/keyvalue/{store}/{key}"'
    assert samples[f'streams_query_forwards_total{{instance="{HOST_B}",{route}}}'] >= 1
    assert samples[f'streams_query_responses_total{{code="503",{route}}}'] == 1


async def test_metrics_leave_out_lags_before_start(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.state = State.CREATED
    cluster.a.lags = {COUNTS: {0: LagInfo(40, 50, 10)}}
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert "streams_store_lag_records{" not in answer.text
    assert _samples(answer.text)['streams_state{state="CREATED"}'] == 1
