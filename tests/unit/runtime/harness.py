"""Shared helpers of the runtime unit tests: configs, small topologies, and KafkaStreams on the fake cluster."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    KafkaStreams,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    Serdes,
    Stores,
    TaskId,
    Topology,
)
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster

APP = "app"
CHANGELOG = f"{APP}-counts-changelog"
LONG = Serdes.Long()
STRING = Serdes.String()


def streams_config(tmp_path: Path, extra: Mapping[str, Any] | None = None, *, instance: int = 0) -> dict[str, Any]:
    """Fast commits and polls, state under tmp_path (one directory per instance)."""
    return {
        "application.id": APP,
        "bootstrap.servers": "fake:9092",
        "state.dir": str(tmp_path / f"state-{instance}"),
        "commit.interval.ms": 20,
        "poll.ms": 10,
        **(extra or {}),
    }


async def eventually(condition: Callable[[], object], *, timeout: float = 3.0, what: str = "condition") -> None:
    """Wait until `condition()` is truthy, checking every few ms; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.005)


def long(value: int) -> bytes:
    data = LONG.serialize(None, value)
    assert data is not None
    return data


def unlong(value: bytes | None) -> int | None:
    return None if value is None else LONG.deserialize(None, value)


# -- topologies -----------------------------------------------------------------------------------


class CountingProcessor(Processor[str, str, str, int]):
    """Counts records per key in the store `counts` and forwards (key, new count)."""

    def __init__(self, seen: list[tuple[str, int | None]] | None = None) -> None:
        self.seen = seen

    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record[str, str]) -> None:
        before = self.store.get(record.key)
        if self.seen is not None:
            self.seen.append((record.key, before))
        self.store.put(record.key, (before or 0) + 1)
        self.context.forward(Record(record.key, (before or 0) + 1, record.timestamp))


def counts_store(logging: bool = True) -> Any:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), STRING, LONG)
    return builder if logging else builder.with_logging_disabled()


def counting_topology(
    source: str = "in", sink: str = "out", *, seen: list[tuple[str, int | None]] | None = None, store: Any = None
) -> Topology:
    """source (string keys and values) -> count per key in the logged store `counts` -> sink (long values)."""
    return (
        Topology()
        .add_source("SRC", source, key_serde=STRING, value_serde=STRING)
        .add_processor("COUNT", lambda: CountingProcessor(seen), "SRC")
        .add_state_store(store if store is not None else counts_store(), "COUNT")
        .add_sink("SINK", sink, "COUNT", key_serde=STRING, value_serde=LONG)
    )


def passthrough_topology(source: str = "in", sink: str = "out") -> Topology:
    return Topology().add_source("SRC", source).add_sink("SINK", sink, "SRC")


class Punctuating(Processor[Any, Any, Any, Any]):
    """Forwards a record per punctuation (value: the punctuation time) of the given type."""

    def __init__(self, kind: PunctuationType, interval: int) -> None:
        self.kind = kind
        self.interval = interval

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        context.schedule(self.interval, self.kind, self.punctuate)

    def punctuate(self, timestamp: int) -> None:
        self.context.forward(Record(b"tick", str(timestamp).encode(), timestamp))

    def process(self, record: Record[Any, Any]) -> None:
        return None


# -- running instances ----------------------------------------------------------------------------


class Instance:
    """A KafkaStreams instance on the fake cluster, with the states it went through."""

    def __init__(self, cluster: FakeKafkaCluster, topology: Topology, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.supplier = FakeKafkaClientSupplier(cluster)
        self.streams = KafkaStreams(topology, config, client_supplier=self.supplier)
        self.states: list[tuple[str, str]] = []
        self.streams.set_state_listener(lambda new, old: self.states.append((old.name, new.name)))
        self.state_dir = Path(config["state.dir"]) / APP

    async def start(self, *, wait: bool = True) -> Instance:
        await self.streams.start()
        if wait:
            await self.wait_running()
        return self

    async def wait_running(self, timeout: float = 3.0) -> None:
        await eventually(
            lambda: self.streams.state is KafkaStreams.State.RUNNING and self.cluster.group_stable(APP),
            timeout=timeout, what=f"RUNNING (state {self.streams.state.name})",
        )

    async def close(self) -> None:
        await self.streams.close(timeout=5)

    def tasks(self) -> set[TaskId]:
        return {t for thread in self.streams.threads if thread.task_manager for t in thread.task_manager.tasks}

    def standby_tasks(self) -> set[TaskId]:
        return {t for thread in self.streams.threads if thread.task_manager for t in thread.task_manager.standby_tasks}

    def metric(self, name: str) -> int:
        return sum(int(t[name]) for t in self.streams.metrics()["threads"])

    def checkpoint(self, task: str = "0_0") -> dict[tuple[str, int], int]:
        path = self.state_dir / task / CHECKPOINT_FILE_NAME
        return OffsetCheckpoint(path).read() if path.exists() else {}


@contextlib.asynccontextmanager
async def running(
    cluster: FakeKafkaCluster, topology: Topology, config: Mapping[str, Any], *, wait: bool = True
) -> AsyncIterator[Instance]:
    """An instance started (and RUNNING unless wait=False) for the block, closed after it."""
    instance = Instance(cluster, topology, config)
    try:
        await instance.start(wait=wait)
        yield instance
    finally:
        await instance.close()


def counts(cluster: FakeKafkaCluster, topic: str = "out", *, committed_only: bool = True) -> dict[str, int | None]:
    """The last count per key in a counting topology's output."""
    return {
        (r.key or b"").decode(): unlong(r.value) for r in cluster.records(topic, committed_only=committed_only)
    }


def produce_words(cluster: FakeKafkaCluster, words: str, *, topic: str = "in", start_ts: int = 1000) -> None:
    for i, word in enumerate(words.split()):
        cluster.produce(topic, word, word, timestamp=start_ts + i)


ROUND_WORDS = [f"w{i}" for i in range(12)]
"""The words `produce_rounds` sends, each once a round."""


def produce_rounds(cluster: FakeKafkaCluster, rounds: int, start_ts: int = 0) -> Counter[str]:
    """`rounds` rounds of `ROUND_WORDS` into "in" (key = value = the word); the words sent, counted."""
    sent: Counter[str] = Counter()
    for r in range(rounds):
        for i, word in enumerate(ROUND_WORDS):
            cluster.produce("in", word, word, timestamp=start_ts + r * 100 + i)
            sent[word] += 1
    return sent


def output_counts(cluster: FakeKafkaCluster) -> dict[str, list[int | None]]:
    """Per key, the counts the output carries, in order (read_committed)."""
    out: dict[str, list[int | None]] = {}
    for record in cluster.records("out"):
        out.setdefault((record.key or b"").decode(), []).append(unlong(record.value))
    return out


def cluster_with(partitions: int) -> FakeKafkaCluster:
    """A cluster with "in" and "out" of `partitions` partitions each."""
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, partitions)
    return cluster


async def start_counting(
    cluster: FakeKafkaCluster, tmp_path: Path, index: int, extra: Mapping[str, Any] | None = None
) -> Instance:
    """Instance `index` of the counting topology, started without waiting for RUNNING."""
    instance = Instance(cluster, counting_topology(), streams_config(tmp_path, extra, instance=index))
    await instance.start(wait=False)
    return instance
