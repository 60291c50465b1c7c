"""run_task_batch: one micro-batch of one task of a task stage, between Spark state and the executor.

The task stage (spark_stages.TaskStage) keeps a task's stores as their compacted changelog in a
map state and the rest of the task (processors' stream time and buffers, the stream-time
punctuations' next times, applied origins, a lineage id and a version) in a value state. A batch
needs the task's stores and schedules as they were after the previous committed batch. With `now`
(the micro-batch's processing time), the wall-clock punctuations due then fire after the records. The Python worker that ran that batch usually still holds the
task's executor, stores filled: it is reused when its version is the one in Spark state (so a
batch Spark rolled back, or a batch run by another worker, is never built upon). Otherwise the
task is rebuilt and restored from the changelog, which is then read in full. Windows and
sessions past their store's retention are deleted from the changelog about once per segment
interval of stream time, as compaction and retention remove them from a changelog topic.
"""

from __future__ import annotations

import logging
import pickle
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from streams_core.spark.partition_group import take_ready
from streams_core.spark.subtopology_executor import (
    SCHEDULES,
    InputRow,
    OutputRow,
    SubtopologyExecutor,
    SubtopologySpec,
)
from streams_core.state.internals import session_key_schema, window_key_schema
from streams_core.state.internals.abstract_session_store import AbstractSessionStore
from streams_core.state.internals.abstract_window_store import AbstractWindowStore

__all__ = ["TaskBatch", "drop_live_tasks", "expired_keys", "run_task_batch"]

log = logging.getLogger(__name__)

ChangelogKey = tuple[str, bytes]
"""(changelog topic, record key)."""

#: Live tasks a Python worker keeps between micro-batches, least recently used first.
MAX_LIVE_TASKS = 32


class TaskBatch(NamedTuple):
    """What one task's micro-batch produced: sink rows, changelog changes (None deletes), the task's state,
    and when its next wall-clock punctuation is due (None: none is scheduled)."""

    rows: list[OutputRow]
    changelog: dict[ChangelogKey, bytes | None]
    task: bytes
    wall_clock_due: int | None = None


class _LiveTask:
    """A task's executor after a batch, with the changelog keys its stores hold and its version."""

    def __init__(self, executor: SubtopologyExecutor, version: int) -> None:
        self.executor = executor
        self.version = version
        self.keys: dict[str, set[bytes]] = {}
        self.swept: dict[str, int] = {}

    def track(self, changes: Iterable[tuple[ChangelogKey, bytes | None]]) -> None:
        for (topic, key), value in changes:
            keys = self.keys.setdefault(topic, set())
            if value is None:
                keys.discard(key)
            else:
                keys.add(key)

    def expired(self) -> list[ChangelogKey]:
        """Changelog keys of windows and sessions past retention, once the cutoff moved a segment on."""
        found: list[ChangelogKey] = []
        for topic, keys in self.keys.items():
            restore = self.executor.restore_callback(topic)
            store = getattr(restore, "__self__", None)
            if not isinstance(store, (AbstractWindowStore, AbstractSessionStore)):
                continue
            cutoff = store.expired_through
            last = self.swept.get(topic)
            if last is not None and cutoff < last + store.segment_interval:
                continue
            self.swept[topic] = cutoff
            gone = expired_keys(store, keys)
            keys.difference_update(gone)
            found.extend((topic, key) for key in gone)
        return found


_live: OrderedDict[tuple[str, int], _LiveTask] = OrderedDict()


def run_task_batch(
    spec: SubtopologySpec, partition: int, rows: Iterable[InputRow], task: bytes | None,
    changelog: Callable[[], Iterable[tuple[str, bytes, bytes]]], now: int | None = None,
) -> TaskBatch:  # fmt: skip
    """One micro-batch of task `partition`: its stores from this worker's live task or restored from
    `changelog()` (called only then), its carried state from `task` (None the first time); runs
    `rows` (with the records held before) in Kafka Streams' order, holding those that must wait for
    a partition with unread data (`take_ready`), and flushes the stores as a commit does."""
    state: dict[str, Any] = (
        pickle.loads(task) if task is not None
        else {"carried": {}, "applied": {}, "read": {}, "held": [], "lineage": uuid.uuid4().hex, "version": 0}
    )  # fmt: skip
    slot = (state["lineage"], partition)
    live = _live.pop(slot, None)  # out of the cache while it runs: a failure leaves nothing behind
    if live is not None and live.version != state["version"]:
        log.info("task %s: live stores at version %d, Spark state at %d: restoring", partition, live.version, state["version"])
        live.executor.close()
        live = None
    if live is None:
        live = _LiveTask(SubtopologyExecutor(spec, partition, state["carried"].get(SCHEDULES, ())), state["version"])
        entries = list(changelog())
        live.executor.restore_changelog(entries)
        live.track(((topic, key), value) for topic, key, value in entries)
        live.executor.restore_carried_state(state["carried"])
    executor = live.executor
    try:
        waits = {tp: offset for tp, offset in spec.wait_offsets.items() if tp[1] == partition}
        if "read" not in state:  # state of a version that did not track reads: take what it read as read
            state["read"] = dict(waits)
        ready, state["held"] = take_ready(state.get("held", ()), rows, state["read"], waits)
        if state["held"]:
            log.debug("task %s holds %d records for partitions with unread data", partition, len(state["held"]))
        skipped = executor.skipped_records
        out = executor.process(ready, state["applied"])
        spec.count_skipped(executor.skipped_records - skipped)
        fired, due = executor.punctuate_wall_clock(now)  # as the runtime's StreamThread: after the records
        out.extend(fired)
        changes: dict[ChangelogKey, bytes | None] = executor.take_changelog()
        out.extend(executor.take_rows())  # what the caches forwarded when flushed
        live.track(changes.items())
        changes.update(dict.fromkeys(live.expired()))
        state["carried"] = executor.carried_state()
    except BaseException:
        executor.close()
        raise
    state["version"] = live.version = state["version"] + 1
    _live[slot] = live
    while len(_live) > MAX_LIVE_TASKS:
        _, oldest = _live.popitem(last=False)
        oldest.executor.close()
    return TaskBatch(out, changes, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), due)


def drop_live_tasks() -> None:
    """Close the live tasks this worker keeps (the next batch of each restores from Spark state)."""
    while _live:
        _, live = _live.popitem()
        live.executor.close()


def expired_keys(store: AbstractWindowStore | AbstractSessionStore, keys: Iterable[bytes]) -> list[bytes]:
    """Changelog keys of windows or sessions `store` no longer keeps (past its retention)."""
    cutoff = store.expired_through
    if isinstance(store, AbstractWindowStore):
        return [k for k in keys if window_key_schema.from_store_key_binary(k)[1] <= cutoff]
    return [k for k in keys if session_key_schema.from_binary(k)[2] <= cutoff]
