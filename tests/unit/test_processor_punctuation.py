"""Punctuation: Kafka Streams' schedule semantics for stream time and wall-clock time, and cancel."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from streams_core import Cancellable, Processor, ProcessorContext, PunctuationType, Record, Topology
from streams_core.processor.internals.punctuation_queue import PunctuationQueue, PunctuationSchedule
from tests.unit.test_processor_task import make_task, pipe


def _queue_with(first_time: int, interval: int, fired: list[int]) -> tuple[PunctuationQueue, PunctuationSchedule]:
    queue = PunctuationQueue()
    schedule = queue.schedule(
        PunctuationSchedule("node", fired.append, interval, PunctuationType.STREAM_TIME, first_time)
    )
    return queue, schedule


def _run(queue: PunctuationQueue, now: int) -> bool:
    return queue.maybe_punctuate(now, lambda schedule, time: schedule.punctuator(time))


def test_fires_once_per_call_and_realigns_to_the_next_boundary() -> None:
    fired: list[int] = []
    queue, schedule = _queue_with(0, 1000, fired)
    assert _run(queue, 0) and schedule.next_time == 1000
    assert not _run(queue, 999)
    assert _run(queue, 1000) and schedule.next_time == 2000
    assert _run(queue, 5500) and schedule.next_time == 6000
    assert not _run(queue, 5999)
    assert fired == [0, 1000, 5500]


def _append(fired: list[str], name: str, time: int) -> None:
    fired.append(name)


def test_schedules_fire_in_time_order_then_scheduling_order() -> None:
    fired: list[str] = []
    queue = PunctuationQueue()
    for name, first in (("late", 20), ("early", 10), ("also-late", 20)):
        queue.schedule(
            PunctuationSchedule(name, partial(_append, fired, name), 100, PunctuationType.STREAM_TIME, first)
        )
    assert queue.next_time == 10
    _run(queue, 50)
    assert fired == ["early", "late", "also-late"]


def test_cancel_before_and_during_the_callback() -> None:
    fired: list[int] = []
    queue, schedule = _queue_with(0, 10, fired)
    assert isinstance(schedule, Cancellable)
    schedule.cancel()
    assert not _run(queue, 100) and fired == [] and len(queue) == 0 and queue.next_time is None

    def once(time: int) -> None:
        fired.append(time)
        self_cancelling.cancel()

    queue = PunctuationQueue()
    self_cancelling = queue.schedule(PunctuationSchedule("n", once, 10, PunctuationType.STREAM_TIME, 0))
    _run(queue, 0)
    _run(queue, 100)
    assert fired == [0]


class Ticker(Processor[Any, Any, Any, Any]):
    """Forwards a tick per punctuation; the value "cancel" cancels the stream-time schedule."""

    def __init__(self, punctuation_type: PunctuationType, interval: int = 1000) -> None:
        self.punctuation_type = punctuation_type
        self.interval = interval
        self.ticks: list[int] = []

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.cancellable = context.schedule(self.interval, self.punctuation_type, self.tick)

    def process(self, record: Record[Any, Any]) -> None:
        if record.value == b"cancel":
            self.cancellable.cancel()

    def tick(self, timestamp: int) -> None:
        self.ticks.append(timestamp)


def _ticker_task(tmp_path: Path, punctuation_type: PunctuationType, clock: Any = lambda: 0) -> tuple[Any, Ticker]:
    ticker = Ticker(punctuation_type)
    topology = Topology().add_source("S", "in").add_processor("T", lambda: ticker, "S")
    return make_task(topology, tmp_path, clock=clock), ticker


def test_stream_time_punctuation_starts_at_zero_and_follows_record_timestamps(tmp_path: Path) -> None:
    task, ticker = _ticker_task(tmp_path, PunctuationType.STREAM_TIME)
    assert not task.maybe_punctuate_stream_time()
    for timestamp in (0, 400, 999, 1000, 1001, 4700, 4800, 4100, 5000):
        pipe(task, "in", b"k", b"v", timestamp)
    assert ticker.ticks == [0, 1000, 4700, 5000]


def test_stream_time_punctuation_before_any_record_waits_for_data(tmp_path: Path) -> None:
    task, ticker = _ticker_task(tmp_path, PunctuationType.STREAM_TIME)
    pipe(task, "in", b"k", b"v", 2500)
    assert ticker.ticks == [2500]
    pipe(task, "in", b"k", b"v", 2999)
    pipe(task, "in", b"k", b"v", 3000)
    assert ticker.ticks == [2500, 3000]


def test_cancel_stops_the_punctuation(tmp_path: Path) -> None:
    task, ticker = _ticker_task(tmp_path, PunctuationType.STREAM_TIME)
    pipe(task, "in", b"k", b"v", 0)
    pipe(task, "in", b"k", b"cancel", 500)
    pipe(task, "in", b"k", b"v", 3000)
    assert ticker.ticks == [0]


def test_wall_clock_punctuation_follows_the_clock(tmp_path: Path) -> None:
    now = [5000]
    task, ticker = _ticker_task(tmp_path, PunctuationType.WALL_CLOCK_TIME, clock=lambda: now[0])
    pipe(task, "in", b"k", b"v", 10_000_000)
    assert ticker.ticks == []
    for now[0] in (5999, 6000, 6500, 9100, 9999, 10000):
        task.maybe_punctuate_wall_clock()
    assert ticker.ticks == [6000, 9100, 10000]
    assert task.maybe_punctuate_wall_clock(11_000)
    assert ticker.ticks[-1] == 11_000


def test_punctuation_marks_the_task_for_commit(tmp_path: Path) -> None:
    task, _ = _ticker_task(tmp_path, PunctuationType.WALL_CLOCK_TIME)
    task.commit()
    assert not task.commit_needed
    task.maybe_punctuate_wall_clock(1000)
    assert task.commit_needed
