"""A prometheus-client collector over `KafkaStreams.metrics()`: read at scrape time, never copied.

Kafka Streams keeps its figures in the client; so do we. Each scrape turns the current
`metrics()` dictionary (client, threads, tasks, partitions) and the store lags of that scrape
into metric families named by Prometheus conventions (base units, `_total` counters, labels for
thread, task, topic and partition). docs/metrics.md maps each to its Kafka Streams metric.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from api.instance import StreamsInstance

__all__ = ["StreamsCollector"]

_THREAD = ["thread"]
_TASK = ["thread", "task"]
_PARTITION = ["thread", "task", "topic", "partition"]
_STORE = ["store", "partition"]

_THREAD_COUNTERS = {
    # metric name (without _total): (key of the thread's metrics, help)
    "streams_thread_process_records": ("processed_records", "Records processed by the stream thread."),
    "streams_thread_punctuate": ("punctuate_count", "Wall-clock punctuations run by the stream thread."),
    "streams_thread_dropped_records": ("dropped_records", "Records dropped by the deserialization handler or for an invalid timestamp."),
    "streams_thread_dead_lettered_records": ("dead_lettered_records", "Records sent to the dead-letter topic."),
    "streams_thread_produced_records": ("produced_records", "Records the stream thread produced."),
    "streams_thread_production_dropped_records": ("production_dropped_records", "Records the production handler dropped."),
    "streams_thread_restored_records": ("restored_records", "Records restored from changelogs."),
    "streams_thread_partition_pauses": ("pause_count", "Partitions paused by flow control."),
    "streams_thread_partition_resumes": ("resume_count", "Partitions resumed by flow control."),
}

_LATENCIES = {
    # summary name: (count key, sum key in ms, help)
    "streams_thread_process_latency_seconds": ("processed_records", "process_latency_ms_total", "Time spent processing, per record."),
    "streams_thread_poll_latency_seconds": ("poll_count", "poll_latency_ms_total", "Time spent in consumer polls, per poll."),
    "streams_thread_commit_latency_seconds": ("commit_count", None, "Time spent committing, per commit."),
}


class StreamsCollector(Collector):
    """The metric families of one KafkaStreams instance; `lags` holds the store lags of the current scrape."""

    def __init__(self, streams: StreamsInstance) -> None:
        self.streams = streams
        self.lags: Mapping[str, Mapping[int, Any]] = {}

    def describe(self) -> list[Metric]:
        return []  # the families depend on the running threads; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        metrics = self.streams.metrics()
        threads: list[dict[str, Any]] = metrics.get("threads", [])
        yield self._state()
        yield from self._thread_counters(threads)
        yield from self._latencies(threads)
        yield from self._cache(threads)
        yield from self._tasks(threads)
        yield from self._stores()
        yield from self._batch(threads)

    def _state(self) -> Metric:
        current = self.streams.state
        family = GaugeMetricFamily("streams_state", "1 for the current state of the KafkaStreams client.", labels=["state"])
        for state in type(current):
            family.add_metric([state.name], int(state is current))
        return family

    @staticmethod
    def _thread_counters(threads: list[dict[str, Any]]) -> Iterator[Metric]:
        for name, (key, help_text) in _THREAD_COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=_THREAD)
            for thread in threads:
                family.add_metric([thread.get("thread", "")], thread.get(key, 0))
            yield family
        tasks = GaugeMetricFamily("streams_thread_tasks", "Tasks assigned to the stream thread.", labels=["thread", "kind"])
        for thread in threads:
            tasks.add_metric([thread.get("thread", ""), "active"], len(thread.get("tasks", [])))
            tasks.add_metric([thread.get("thread", ""), "standby"], len(thread.get("standby_tasks", [])))
        yield tasks
        workers = [t for t in threads if t.get("pid") is not None]
        if workers:  # stream.threads.mode=process: each thread is a worker process
            cpu = CounterMetricFamily("streams_thread_worker_cpu_seconds", "CPU time of the thread's worker process.", labels=_THREAD)
            pid = GaugeMetricFamily("streams_thread_worker_pid", "Process id of the thread's worker process.", labels=_THREAD)
            for thread in workers:
                cpu.add_metric([thread.get("thread", "")], thread.get("worker_cpu_seconds", 0.0))
                pid.add_metric([thread.get("thread", "")], thread["pid"])
            yield cpu
            yield pid

    @staticmethod
    def _latencies(threads: list[dict[str, Any]]) -> Iterator[Metric]:
        for name, (count_key, sum_key, help_text) in _LATENCIES.items():
            family = SummaryMetricFamily(name, help_text, labels=_THREAD)
            for thread in threads:
                count = thread.get(count_key, 0)
                if sum_key is None:  # the commit latency comes as a mean
                    total_ms = thread.get("commit_latency_ms_avg", 0.0) * count
                else:
                    total_ms = thread.get(sum_key, 0.0)
                family.add_metric([thread.get("thread", "")], count_value=count, sum_value=total_ms / 1000)
            yield family

    @staticmethod
    def _cache(threads: list[dict[str, Any]]) -> Iterator[Metric]:
        counters = {
            kind: CounterMetricFamily(f"streams_cache_{kind}", f"Record cache {kind} of the stream thread.", labels=_THREAD)
            for kind in ("hits", "misses", "evictions")
        }
        ratio = GaugeMetricFamily("streams_cache_hit_ratio", "Record cache hits / lookups (0 before a lookup).", labels=_THREAD)
        for thread in threads:
            cache = thread.get("cache") or {}
            name = thread.get("thread", "")
            for kind, family in counters.items():
                family.add_metric([name], cache.get(kind, 0))
            lookups = cache.get("hits", 0) + cache.get("misses", 0)
            ratio.add_metric([name], cache.get("hits", 0) / lookups if lookups else 0.0)
        yield from counters.values()
        yield ratio

    @staticmethod
    def _tasks(threads: list[dict[str, Any]]) -> Iterator[Metric]:
        processed = CounterMetricFamily("streams_task_process_records", "Records processed by the task.", labels=_TASK)
        dropped = CounterMetricFamily("streams_task_dropped_records", "Records the task dropped.", labels=_TASK)
        restored = CounterMetricFamily("streams_task_restored_records", "Records restored for the task.", labels=_TASK)
        lag = GaugeMetricFamily("streams_partition_records_lag", "End offset minus the next offset to process.", labels=_PARTITION)
        buffered = GaugeMetricFamily("streams_partition_buffered_records", "Records fetched and not yet processed.", labels=_PARTITION)
        skipped = CounterMetricFamily("streams_partition_skipped_records", "Records skipped (undeserializable or bad timestamp).", labels=_PARTITION)
        paused = GaugeMetricFamily("streams_partition_paused", "1 while flow control pauses the partition.", labels=_PARTITION)
        for thread in threads:
            name = thread.get("thread", "")
            for task_id, task in thread.get("task_metrics", {}).items():
                processed.add_metric([name, task_id], task["processed_records"])
                dropped.add_metric([name, task_id], task["dropped_records"])
                restored.add_metric([name, task_id], task["restored_records"])
                for tp, info in task["partitions"].items():
                    topic, partition = tp.rsplit("-", 1)
                    labels = [name, task_id, topic, partition]
                    if info.get("records_lag") is not None:
                        lag.add_metric(labels, info["records_lag"])
                    buffered.add_metric(labels, info["buffered"])
                    skipped.add_metric(labels, info["skipped"])
                    paused.add_metric(labels, int(info["paused"]))
        yield from (processed, dropped, restored, lag, buffered, skipped, paused)

    def _stores(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("streams_store_lag_records", "Changelog records a local store copy is behind (restore progress).", labels=_STORE)
        offset = GaugeMetricFamily("streams_store_offset", "Changelog position of a local store copy.", labels=_STORE)
        for store, by_partition in sorted(self.lags.items()):
            for partition, info in sorted(by_partition.items()):
                lag.add_metric([store, str(partition)], info.offset_lag)
                offset.add_metric([store, str(partition)], info.current_offset_position)
        yield lag
        yield offset

    @staticmethod
    def _batch(threads: list[dict[str, Any]]) -> Iterator[Metric]:
        to_go = GaugeMetricFamily("streams_batch_records_to_go", "KIP-95 batch run: records of a partition before its stop offset.",
                                  labels=["topic", "partition"])
        finished = GaugeMetricFamily("streams_batch_finished", "KIP-95 batch run: 1 once every task of a stream thread reached its stop offsets.",
                                     labels=_THREAD)
        for thread in threads:
            batch = thread.get("autostop")
            if not batch:
                continue
            finished.add_metric([thread.get("thread", "")], int(batch["finished"]))
            for name, info in batch["partitions"].items():
                if info["stop_offset"] is not None:
                    topic, partition = name.rsplit("-", 1)
                    to_go.add_metric([topic, partition], info["stop_offset"] - info["offset"])
        yield to_go
        yield finished
