"""`/metrics` in the Prometheus text exposition format (0.0.4), written by hand (no dependency).

| metric                                   | type      | from                                   |
|------------------------------------------|-----------|----------------------------------------|
| `streams_state{state}`                   | gauge     | 1 for the current client state, else 0 |
| `streams_processed_records_total`        | counter   | the stream threads                     |
| `streams_process_rate`                   | gauge     | processed records / s since the API started |
| `streams_commit_latency_ms_avg`          | gauge     | commits of all threads                 |
| `streams_commits_total`                  | counter   | the stream threads                     |
| `streams_restored_records_total`         | counter   | records restored from changelogs       |
| `streams_store_lag{store,partition}`     | gauge     | `all_local_store_partition_lags()`     |
| `streams_store_offset{store,partition}`  | gauge     | the local position in the changelog    |
| `streams_query_latency_seconds{route}`   | histogram | every matched request, by route template |
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from api.instance import StreamsInstance
from streams_core import StreamsError

__all__ = ["CONTENT_TYPE", "QueryLatency", "render_metrics"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class QueryLatency:
    """A latency histogram per route template (bounded: only the routes of the app)."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, route: str, seconds: float) -> None:
        counts = self._counts.setdefault(route, [0] * (len(_BUCKETS) + 1))
        counts[bisect.bisect_left(_BUCKETS, seconds)] += 1
        self._sums[route] = self._sums.get(route, 0.0) + seconds

    def lines(self) -> Iterable[str]:
        name = "streams_query_latency_seconds"
        yield f"# HELP {name} Latency of REST queries by route."
        yield f"# TYPE {name} histogram"
        for route in sorted(self._counts):
            label = f'route="{_escape(route)}"'
            total = 0
            for bound, count in zip((*_BUCKETS, None), self._counts[route], strict=True):
                total += count
                le = "+Inf" if bound is None else repr(bound)
                yield f'{name}_bucket{{{label},le="{le}"}} {total}'
            yield f"{name}_sum{{{label}}} {self._sums[route]!r}"
            yield f"{name}_count{{{label}}} {total}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metric(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {value!r}" for labels, value in samples]
    return lines


async def _lags(streams: StreamsInstance, timeout: float) -> Mapping[str, Mapping[int, Any]]:
    """Store lags, or none when the client is not started or the broker does not answer in time."""
    try:
        async with asyncio.timeout(timeout):
            return await streams.all_local_store_partition_lags()
    except (StreamsError, TimeoutError, OSError) as exc:
        log.debug("store lags left out of /metrics: %r", exc)
        return {}


_HELP = {
    "streams_state": ("gauge", "1 for the current state of the KafkaStreams client."),
    "streams_processed_records_total": ("counter", "Records processed by all stream threads."),
    "streams_process_rate": ("gauge", "Records processed per second since the REST server started."),
    "streams_commits_total": ("counter", "Commits of all stream threads."),
    "streams_commit_latency_ms_avg": ("gauge", "Mean commit latency in milliseconds."),
    "streams_restored_records_total": ("counter", "Records restored from changelogs."),
    "streams_store_lag": ("gauge", "Changelog records a local store copy is behind."),
    "streams_store_offset": ("gauge", "Changelog position of a local store copy."),
    "streams_batch_records_to_go": ("gauge", "KIP-95 batch run: records of a partition before its stop offset."),
    "streams_batch_finished": ("gauge", "KIP-95 batch run: 1 once every task of a stream thread reached its stop offsets."),
}


def _batch_samples(threads: list[dict[str, Any]]) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Records to go per partition with a known stop offset, and whether each thread finished."""
    to_go: list[tuple[str, float]] = []
    finished: list[tuple[str, float]] = []
    for thread in threads:
        batch = thread.get("autostop")
        if not batch:
            continue
        finished.append((f'{{thread="{_escape(thread["thread"])}"}}', int(batch["finished"])))
        for name, info in batch["partitions"].items():
            if info["stop_offset"] is not None:
                topic, partition = name.rsplit("-", 1)
                labels = f'{{topic="{_escape(topic)}",partition="{partition}"}}'
                to_go.append((labels, info["stop_offset"] - info["offset"]))
    return to_go, finished


async def render_metrics(streams: StreamsInstance, latency: QueryLatency, started: float, lag_timeout: float) -> str:
    """The exposition text of the client, its threads, its local stores and the REST queries."""
    threads: list[dict[str, Any]] = streams.metrics().get("threads", [])
    processed = sum(t.get("processed_records", 0) for t in threads)
    commits = sum(t.get("commit_count", 0) for t in threads)
    commit_ms = sum(t.get("commit_latency_ms_avg", 0.0) * t.get("commit_count", 0) for t in threads)
    current = streams.state
    lags = await _lags(streams, lag_timeout)
    stores = sorted(
        (store, partition, info) for store, by_partition in lags.items() for partition, info in by_partition.items()
    )

    def by_store(attribute: str) -> list[tuple[str, float]]:
        return [(f'{{store="{_escape(s)}",partition="{p}"}}', getattr(info, attribute)) for s, p, info in stores]

    samples: dict[str, list[tuple[str, float]]] = {
        "streams_state": [(f'{{state="{state.name}"}}', int(state is current)) for state in type(current)],
        "streams_processed_records_total": [("", processed)],
        "streams_process_rate": [("", processed / max(time.monotonic() - started, 1e-9))],
        "streams_commits_total": [("", commits)],
        "streams_commit_latency_ms_avg": [("", commit_ms / commits if commits else 0.0)],
        "streams_restored_records_total": [("", sum(t.get("restored_records", 0) for t in threads))],
        "streams_store_lag": by_store("offset_lag"),
        "streams_store_offset": by_store("current_offset_position"),
    }
    samples["streams_batch_records_to_go"], samples["streams_batch_finished"] = _batch_samples(threads)
    lines = [line for name, (kind, text) in _HELP.items() for line in _metric(name, kind, text, samples[name])]
    lines += latency.lines()
    return "\n".join(lines) + "\n"
