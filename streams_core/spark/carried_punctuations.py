"""Punctuations carried between a Spark task's micro-batches.

A Spark task is rebuilt for every micro-batch, so its stream-time schedules would restart at 0 and
its wall-clock ones at now + interval; `SparkTaskProcessor` records them (`schedules()`) for the
stage to keep in Spark state and resumes them from there, and refuses the punctuations Spark
cannot run. The task stage registers a processing-time timer at `wall_clock_due` so that Spark
calls a task without records when a wall-clock punctuation is due.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.punctuation_queue import PunctuationSchedule
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.processor import PunctuationType, Punctuator
from streams_core.spark.errors import UnsupportedOnSparkError

__all__ = ["SCHEDULES", "PunctuationNeedsTask", "Schedule", "SparkTaskProcessor", "timers_caught_up"]

log = logging.getLogger(__name__)

#: Key of `SubtopologyExecutor.carried_state()` holding the schedules (no node name is a tuple).
SCHEDULES = ("punctuations",)

Schedule = tuple[str, int, str, int, bool]
"""A carried schedule: (node name, interval ms, punctuation type, next time, cancelled)."""


class PunctuationNeedsTask(UnsupportedOnSparkError):
    """A processor scheduled a punctuation outside the task stage: only the task keeps stream time and
    schedules, and only its stage has timers."""


class SparkTaskProcessor(TaskProcessor):
    """A TaskProcessor whose schedules (stream-time and wall-clock) are carried between micro-batches.

    Only the task stage (`punctuations`) keeps a task's stream time and timers; elsewhere a schedule
    raises `PunctuationNeedsTask`, which the plan takes to move the sub-topology to the task stage.
    Any schedule of a global store's processor (`punctuations` None) is refused, as Kafka Streams does.
    `carried` are the schedules of an earlier batch of the task (`schedules()`): the processors'
    `schedule()` calls, matched in order per node, resume at their next time instead of 0.
    """

    def __init__(
        self, *args: Any, punctuations: bool | None = False, carried: Iterable[Schedule] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._punctuations = punctuations
        self._carried: dict[str, list[Schedule]] = {}
        for entry in carried:
            self._carried.setdefault(entry[0], []).append(entry)
        self._schedules: list[tuple[str, PunctuationSchedule]] = []

    def schedule(
        self, node: ProcessorNode, interval_ms: int, punctuation_type: PunctuationType, punctuator: Punctuator
    ) -> PunctuationSchedule:
        operator = f"{type(node.processor).__name__}.schedule({punctuation_type.name})"
        if self._punctuations is None:
            raise UnsupportedOnSparkError(operator, node.name, "a global store's processor has no stream time "
                                          "(Kafka Streams' global context refuses schedule() too)")  # fmt: skip
        if not self._punctuations:
            raise PunctuationNeedsTask(operator, node.name, "punctuations run in the task stage only")
        carried = self._carried.get(node.name)
        entry = carried.pop(0) if carried else None
        if entry is not None and entry[1:3] == (interval_ms, punctuation_type.name):
            schedule = PunctuationSchedule(node, punctuator, interval_ms, punctuation_type, entry[3])
            if entry[4]:
                schedule.cancel()
            elif punctuation_type is PunctuationType.STREAM_TIME:
                self.stream_time_punctuations.schedule(schedule)
            else:
                self._wall_clock_punctuations.schedule(schedule)
        else:
            if entry is not None:
                log.warning("task %s: %s scheduled %s, not the %s carried: it starts afresh",
                            self.task_id, node.name, (interval_ms, punctuation_type.name), entry[1:3])  # fmt: skip
            schedule = super().schedule(node, interval_ms, punctuation_type, punctuator)
        self._schedules.append((node.name, schedule))
        return schedule

    @property
    def wall_clock_due(self) -> int | None:
        """When the earliest live wall-clock schedule is due (the task stage's timer), None if none is."""
        return self._wall_clock_punctuations.next_time

    def schedules(self) -> list[Schedule]:
        """Every schedule made so far, in order, with its next time (carried to the next batch)."""
        return [(name, s.interval_ms, s.punctuation_type.name, s.next_time, s.cancelled) for name, s in self._schedules]


def timers_caught_up(reports: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an availableNow query with processing-time timers has read all its input: its last
    micro-batch (not the first of the run, which may be a batch the previous run left unfinished)
    read no offsets. Spark asks for another batch after every batch of such a query, so it never
    ends by itself; the runner stops it here, once the wall-clock punctuations then due have fired."""
    if len(reports) < 2:
        return False
    last = reports[-1]
    return not last.get("numInputRows") and all(s["startOffset"] == s["endOffset"] for s in last.get("sources") or ())
