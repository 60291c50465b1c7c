"""Issue 15: poison records at 1% of the input, under each error policy, on the real broker.

The input (2 partitions) holds word-count lines as JSON `{"text": "..."}` and, at 1%, poison
of five kinds (`tests/chaos/faults.py`): an undecodable (non-UTF-8) key, an undecodable value,
malformed JSON, JSON of the wrong shape (the typed value serde refuses it), and a negative
timestamp on an otherwise good record. Under each policy:

- `log_and_continue`: every good record counted exactly, every bad one skipped and counted in
  `dropped_records`, the input committed to its end; negative timestamps as the extractor says
  (`LogAndSkipOnInvalidTimestamp`: dropped; `UsePartitionTimeOnInvalidTimestamp`: counted);
- `dead_letter`: the same counts; every record that failed to deserialize is in the dead-letter
  topic with its original bytes and the headers naming its topic, partition and offset;
  negative timestamps are the timestamp extractor's (skipped, counted), as in Kafka Streams;
- `log_and_fail` (with the default `FailOnInvalidTimestamp`), for each kind: the application
  stops with an error naming the first bad record's topic, partition and offset, and never
  commits past it (a restart meets it again).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, LogAndSkipOnInvalidTimestamp, QueryableStoreTypes, State
from streams_core.processor.timestamp_extractor import UsePartitionTimeOnInvalidTimestamp
from tests.chaos.faults import POISON_KINDS, Input, json_word_count, produce_input
from tests.integration.apps.harness import committed_offsets, running_instance, wait_all_committed
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.chaos]

PARTITIONS = 2
FAST = {"commit.interval.ms": 100, "poll.ms": 50, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "linger.ms": 5}


def config(bootstrap: str, tmp_path: Path, handler: str, **extra: Any) -> dict[str, Any]:
    return {
        "application.id": unique_topic(f"poison-{handler}"),
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path / handler),
        "default.deserialization.exception.handler": handler,
        **FAST,
        **extra,
    }


@pytest.fixture(scope="module")
async def one_percent(bootstrap_servers: str) -> Input:
    """3,000 records, 1% poison: 6 of each kind."""
    data = await produce_input(bootstrap_servers, 3_000, POISON_KINDS, 0.01, seed=15, partitions=PARTITIONS)
    assert Counter(p.kind for p in data.bad.values()) == dict.fromkeys(POISON_KINDS, 6)
    assert any(p.timestamp_ms is not None and p.timestamp_ms < 0 for p in data.bad.values())
    return data


async def count_everything(
    bootstrap: str, data: Input, cfg: dict[str, Any], truth: Counter[str] | None = None
) -> tuple[dict[str, int], dict[str, Any]]:
    """Run to the end of the input; the word counts through the interactive-query API and the thread metrics."""
    output = unique_topic("poison-out")
    await create_topic(bootstrap, output, PARTITIONS)
    async with running_instance(json_word_count(data.topic, output), cfg) as streams:
        await wait_all_committed(bootstrap, cfg["application.id"], data.topic)
        # The repartition topic's records are counted once the input's offsets are committed.
        store = streams.store("word-count", QueryableStoreTypes.key_value_store())
        deadline = time.monotonic() + 30
        while dict(store.all()) != dict(truth or data.truth) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        counts = dict(store.all())
        (metrics,) = streams.metrics()["threads"]
    return counts, metrics


@pytest.mark.parametrize("extractor", [LogAndSkipOnInvalidTimestamp, UsePartitionTimeOnInvalidTimestamp])
async def test_log_and_continue_counts_every_good_record_and_drops_every_bad_one(
    bootstrap_servers: str, tmp_path: Path, one_percent: Input, extractor: type
) -> None:
    """Negative timestamps are the extractor's: skipped (counted as dropped), or given the partition time and counted."""
    cfg = config(bootstrap_servers, tmp_path, "log_and_continue", **{"default.timestamp.extractor": extractor})
    truth = Counter(one_percent.truth)
    dropped = len(one_percent.bad)
    if extractor is UsePartitionTimeOnInvalidTimestamp:
        for poison in one_percent.bad.values():
            if poison.kind == "negative-timestamp":
                truth.update(json.loads(poison.value)["text"].split())
                dropped -= 1
    counts, metrics = await count_everything(bootstrap_servers, one_percent, cfg, truth)
    assert counts == dict(truth), "good records lost or counted twice"
    assert metrics["dropped_records"] == dropped
    assert metrics["dead_lettered_records"] == 0


async def test_dead_letter_topic_gets_every_undeserializable_record_with_its_origin(
    bootstrap_servers: str, tmp_path: Path, one_percent: Input
) -> None:
    dlq = unique_topic("poison-dlq")
    await create_topic(bootstrap_servers, dlq, 1)
    cfg = config(
        bootstrap_servers,
        tmp_path,
        "dead_letter",
        **{"errors.dead.letter.queue.topic.name": dlq, "default.timestamp.extractor": LogAndSkipOnInvalidTimestamp},
    )
    counts, metrics = await count_everything(bootstrap_servers, one_percent, cfg)
    assert counts == dict(one_percent.truth), "good records lost or counted twice"

    undeserializable = {at: p for at, p in one_percent.bad.items() if p.deserializable}
    dead = await read_all(bootstrap_servers, dlq, timeout=30)
    found: dict[tuple[int, int], Any] = {}
    for record in dead:
        headers = dict(record.headers)
        assert headers["__streams.errors.topic"] == one_percent.topic.encode()
        assert headers["__streams.errors.exception"] == b"DeserializationError"
        at = (int(headers["__streams.errors.partition"]), int(headers["__streams.errors.offset"]))
        assert at not in found, f"record {at} dead-lettered twice"
        found[at] = record
    assert set(found) == set(undeserializable), "the dead-letter topic holds other records than the bad ones"
    for at, record in found.items():
        assert (record.key, record.value) == (undeserializable[at].key, undeserializable[at].value), "bytes changed"
    assert metrics["dead_lettered_records"] == len(undeserializable)
    # Dead-lettered records are dropped records too (as Kafka Streams' dropped-records), and so
    # are the negative timestamps the extractor skipped.
    assert metrics["dropped_records"] == len(one_percent.bad)


@pytest.mark.parametrize("kind", POISON_KINDS)
async def test_log_and_fail_stops_at_the_first_bad_record_and_names_it(
    bootstrap_servers: str, tmp_path: Path, kind: str
) -> None:
    data = await produce_input(bootstrap_servers, 300, (kind,), 0.01, seed=POISON_KINDS.index(kind), partitions=PARTITIONS)
    cfg = config(bootstrap_servers, tmp_path, "log_and_fail")
    output = unique_topic("poison-out")
    await create_topic(bootstrap_servers, output, PARTITIONS)
    streams = KafkaStreams(json_word_count(data.topic, output), cfg)
    try:
        await streams.start()
        state = await streams.wait_for_state(State.ERROR, State.NOT_RUNNING, timeout=30)
    finally:
        await streams.close(timeout=30)
    assert state is State.ERROR
    assert streams.errors, "the instance stopped without saying why"
    message = str(streams.errors[0])
    print(f"\nlog_and_fail, {kind}: {message}")
    first = data.first_bad()
    named = [
        (p, o) for p, o in first.items() if f"topic={data.topic}" in message and f"partition={p}" in message and f"offset={o}" in message
    ]
    assert named, f"the error does not name the first bad record of a partition {first}: {message}"
    committed = await committed_offsets(bootstrap_servers, cfg["application.id"], data.topic)
    assert all(committed.get(p, 0) <= o for p, o in first.items()), f"committed past a bad record: {committed} > {first}"
