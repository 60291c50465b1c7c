"""`/metrics` with prometheus-client: the KafkaStreams collector plus the REST layer's own instruments.

Each app has its own `CollectorRegistry` (several apps may live in one process, as in tests).
REST instruments, by route template (`/state/keyvalue/{store}/{key}`), so their labels are bounded:

| metric                                          | type      |
|-------------------------------------------------|-----------|
| `streams_query_duration_seconds{route}`         | histogram (its `_count` is the query count) |
| `streams_query_responses_total{route,code}`     | counter (`code="503"`: not available now) |
| `streams_query_forwards_total{route,instance}`  | counter: queries sent on to another instance |

Beside them, prometheus-client's default collectors of the process (`process_*`: CPU, memory,
open file descriptors) and of Python (`python_gc_*`, `python_info`), as every Python service
exposes them. docs/metrics.md lists every metric with its Kafka Streams counterpart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from api.instance import StreamsInstance
from api.streams_collector import StreamsCollector
from streams_core import StreamsError

__all__ = ["CONTENT_TYPE", "StreamsMetrics"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus scrapes (what `generate_latest` writes)."""


async def _lags(streams: StreamsInstance, timeout: float) -> Mapping[str, Mapping[int, Any]]:
    """Store lags, or none when the client is not started or the broker does not answer in time."""
    try:
        async with asyncio.timeout(timeout):
            return await streams.all_local_store_partition_lags()
    except (StreamsError, TimeoutError, OSError) as exc:
        log.debug("store lags left out of /metrics: %r", exc)
        return {}


class StreamsMetrics:
    """The registry of one app: the instance's collector, the per-route query instruments, and
    prometheus-client's process, platform and GC collectors (the global registry's defaults)."""

    def __init__(self, streams: StreamsInstance) -> None:
        self.streams = streams
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = StreamsCollector(streams)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.query_duration = Histogram(
            "streams_query_duration_seconds", "Latency of REST queries by route template.", ["route"], registry=self.registry
        )
        self.responses = Counter(
            "streams_query_responses", "REST answers by route template and status code.", ["route", "code"], registry=self.registry
        )
        self.forwards = Counter(
            "streams_query_forwards", "Queries forwarded to another instance.", ["route", "instance"], registry=self.registry
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        """One answered request of a route."""
        self.query_duration.labels(route).observe(seconds)
        self.responses.labels(route, str(status)).inc()

    def forwarded(self, route: str, instance: str) -> None:
        self.forwards.labels(route, instance).inc()

    async def render(self, lag_timeout: float) -> bytes:
        """The exposition text; store lags are asked once per scrape (bounded by `lag_timeout`)."""
        self.collector.lags = await _lags(self.streams, lag_timeout)
        return bytes(generate_latest(self.registry))
