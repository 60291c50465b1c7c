"""Wall-clock punctuations on Spark: processing-time timers call a task without records.

Kafka Streams fires a wall-clock schedule when the system time reached its next due time, records
or not, once however many intervals were missed (`PunctuationSchedule.next`), and never again once
cancelled. Wall-clock output cannot equal Kafka Streams' record for record, so the test asserts
those rules on a continuous run: a task fires in micro-batches that bring it no records, at most
once per due time, and a cancelled schedule stays cancelled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import Processor, PunctuationType, Record, Serdes, Stores, Topology
from streams_core.spark import SparkRunner, task_batch
from streams_core.spark.carried_punctuations import timers_caught_up
from streams_core.spark.subtopology_executor import InputRow
from streams_core.spark.task_batch import run_task_batch
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

S = Serdes.String()
INTERVAL_MS = 400


class Beat(Processor[str, str, str, str]):
    """Counts its task's records in a store; every `INTERVAL_MS` of wall-clock time forwards
    "beat <count>@<time>"; a second schedule forwards "once@<time>" and cancels itself."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("seen")
        self.task = str(context.task_id.partition)
        context.schedule(INTERVAL_MS, PunctuationType.WALL_CLOCK_TIME, self.beat)
        self.first = context.schedule(INTERVAL_MS, PunctuationType.WALL_CLOCK_TIME, self.once)

    def process(self, record: Record[str, str]) -> None:
        self.store.put(self.task, (self.store.get(self.task) or 0) + 1)

    def beat(self, timestamp: int) -> None:
        self.context.forward(Record(self.task, f"beat {self.store.get(self.task) or 0}@{timestamp}", timestamp))

    def once(self, timestamp: int) -> None:
        self.first.cancel()
        self.context.forward(Record(self.task, f"once@{timestamp}", timestamp))


def beat_topology(source: str, output: str) -> Topology:
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("seen"), S, Serdes.Long())
    return (Topology()
            .add_source("SOURCE", source, key_serde=S, value_serde=S)
            .add_processor("BEAT", Beat, "SOURCE")
            .add_state_store(store, "BEAT")
            .add_sink("SINK", output, "BEAT", key_serde=S, value_serde=S))  # fmt: skip


@pytest.mark.parametrize("worker", ["rebuilt", "live"])
def test_the_task_stage_fires_each_due_schedule_once_and_carries_it(worker: str) -> None:
    """`run_task_batch` with the micro-batch's processing time, the task kept live or rebuilt from
    its Spark state for each call: Kafka Streams' wall-clock rules, on times the test chooses."""
    (query,) = SparkRunner(beat_topology("in", "out"), {"application.id": "wc", "bootstrap.servers": "127.0.0.1:9"}
                           ).plan().queries  # fmt: skip
    changelog: dict[tuple[str, bytes], bytes] = {}
    task: bytes | None = None

    def batch(records: int, now: int) -> tuple[list[str], int | None]:
        nonlocal task
        if worker == "rebuilt":
            task_batch.drop_live_tasks()
        rows = [InputRow("in", 0, i, 0, b"k", b"v", ()) for i in range(records)]
        done = run_task_batch(query.spec, 0, rows, task, lambda: [(t, k, v) for (t, k), v in changelog.items()], now)
        task = done.task
        for key, value in done.changelog.items():
            if value is None:
                changelog.pop(key, None)
            else:
                changelog[key] = value
        return [r.value.decode() for r in done.rows if r.value is not None], done.wall_clock_due

    started = int(time.time() * 1000)
    out, due = batch(2, started)
    assert out == [] and due is not None and started + INTERVAL_MS <= due <= int(time.time() * 1000) + INTERVAL_MS
    assert batch(0, due - 1) == ([], due), "not due yet"
    out, after = batch(0, due + 10)  # both schedules (made a millisecond apart at most) are due
    assert out == [f"beat 2@{due + 10}", f"once@{due + 10}"] and after == due + INTERVAL_MS
    late = due + 5 * INTERVAL_MS + 7  # five intervals missed: one beat, the next on the interval grid
    assert batch(1, late) == ([f"beat 3@{late}"], due + 6 * INTERVAL_MS), "the cancelled schedule stays cancelled"


def test_an_available_now_run_with_timers_ends_at_its_first_batch_that_read_nothing() -> None:
    def report(rows: int, start: str | None, end: str) -> dict[str, Any]:
        return {"numInputRows": rows, "sources": [{"startOffset": start, "endOffset": end}]}

    assert not timers_caught_up([report(0, "a", "a")]), "the first may be the previous run's unfinished batch"
    assert not timers_caught_up([report(0, "a", "a"), report(5, "a", "b")])
    assert not timers_caught_up([report(5, None, "b"), report(0, "b", "c")]), "offsets moved (control records)"
    assert timers_caught_up([report(5, None, "b"), report(0, "b", "b")])


async def _fired(bootstrap: str, topic: str) -> dict[str, list[tuple[str, int]]]:
    """Per task: (what fired, e.g. "beat 3" or "once", at which time), in the order written."""
    out: dict[str, list[tuple[str, int]]] = {"0": [], "1": []}
    for r in await read_all(bootstrap, topic, timeout=5):
        assert r.key is not None and r.value is not None
        what, at = r.value.decode().rsplit("@", 1)
        out[r.key.decode()].append((what, int(at)))
    return out


async def _wait_for(bootstrap: str, topic: str, done: Callable[[dict[str, list[tuple[str, int]]]], bool],
                    errors: list[BaseException]) -> dict[str, list[tuple[str, int]]]:  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        fired = await _fired(bootstrap, topic)
        if done(fired):
            return fired
        assert not errors, errors
        assert time.monotonic() < deadline, f"punctuations did not fire: {fired}"
        await asyncio.sleep(1)


def _beats(fired: list[tuple[str, int]], count: int, after: int = 0) -> int:
    return sum(1 for what, at in fired if what == f"beat {count}" and at > after)


async def test_wall_clock_punctuations_fire_without_records_once_per_due_time(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("wallclock")
    source, output = f"in-{suffix}", f"out-{suffix}"
    await create_topic(bootstrap_servers, source, partitions=2)
    await create_topic(bootstrap_servers, output, partitions=1)
    runner = SparkRunner(beat_topology(source, output), {"application.id": f"spark-{suffix}",
                         "bootstrap.servers": bootstrap_servers}, spark=spark)  # fmt: skip
    (query,) = runner.plan().queries
    assert (query.stage, query.wall_clock_ms) == ("task", INTERVAL_MS)
    await produce(bootstrap_servers, source, [Rec(b"k", b"v", p) for p in (0, 0, 0, 0, 0, 1, 1, 1)])
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run("continuous", tmp_path / "checkpoints")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        # The records come in the first micro-batch; later beats come from timers, in batches without records.
        await _wait_for(bootstrap_servers, output, lambda f: _beats(f["0"], 5) >= 3 and _beats(f["1"], 3) >= 3, errors)
        sent = int(time.time() * 1000)
        await produce(bootstrap_servers, source, [Rec(b"k", b"w", 0)] * 4)  # task 0 only
        fired = await _wait_for(bootstrap_servers, output,
                                lambda f: _beats(f["0"], 9) >= 2 and _beats(f["1"], 3, after=sent) >= 2, errors)  # fmt: skip
    finally:
        runner.stop()
        await asyncio.to_thread(thread.join, 60)
    assert not thread.is_alive() and not errors, errors
    assert any(report["numInputRows"] == 0 for report in runner.progress[0]), "micro-batches without records ran"
    for task, count in (("0", 9), ("1", 3)):
        beats = [at for what, at in fired[task] if what.startswith("beat")]
        assert beats == sorted(set(beats)), f"task {task}: one beat per micro-batch at most, in order"
        # Between two beats lies a due time, and due times are INTERVAL_MS apart: at most once per due time.
        assert all(b - a > INTERVAL_MS for a, b in zip(beats, beats[2:], strict=False)), (task, beats)
        assert [what for what, _ in fired[task]].count("once") == 1, f"task {task}: the cancelled schedule stopped"
        assert fired[task][-1][0] == f"beat {count}"

    # available_now from the checkpoint, no new records, several intervals after the last beat: each
    # overdue schedule fires once in a micro-batch (not once per missed interval), and the run ends.
    await asyncio.sleep(6 * INTERVAL_MS / 1000)
    before = await _fired(bootstrap_servers, output)
    rerun = SparkRunner(beat_topology(source, output), {"application.id": f"spark-{suffix}",
                        "bootstrap.servers": bootstrap_servers}, spark=spark)  # fmt: skip
    await asyncio.wait_for(asyncio.to_thread(rerun.run, "available_now", tmp_path / "checkpoints"), 180)
    after = await _fired(bootstrap_servers, output)
    batches = len(rerun.progress[0])
    for task, count in (("0", 9), ("1", 3)):
        new = after[task][len(before[task]):]
        assert new and all(what == f"beat {count}" for what, _ in new), new
        # Caught up per missed interval, a batch would fire several beats of one time; the stop may cut
        # one more batch short after it wrote (the Kafka sink is at-least-once).
        assert len({at for _, at in new}) == len(new) <= batches + 1, (new, batches)
