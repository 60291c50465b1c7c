"""StoreChangelogReader: restores a task's stores from their changelog partitions.

KIP-28 "Persisting and Restoring State": before a task processes (or is queryable), each logged
store replays its changelog partition from the checkpointed offset (or from the beginning) up
to the end offset, through the restore callback the innermost store registered. A changelog that
is a source topic of the task (a read-only store, a table's topic reused by
`topology.optimization`) is restored only up to the group's committed offset (the task processes
the rest), its plain values converted for stores of `ValueAndTimestamp`s (`ChangelogPartition`). The restore
consumer has no group; "caught up" is `position >= end offset` (under read_committed the end is
the last stable offset and transaction markers are never returned as records).

A checkpoint past the changelog's end, or a position the broker no longer has (the changelog was
truncated, deleted and recreated), means the stores hold data the changelog does not: the reader
raises TaskCorruptedError and the task manager wipes the task and restores it from scratch (Java's
StoreChangelogReader marks such tasks corrupted the same way).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import TaskCorruptedError
from streams_core.state.internals.processor_state_manager import ChangelogPartition

__all__ = ["ChangelogPartition", "RestoreResult", "StoreChangelogReader"]

log = logging.getLogger(__name__)

_PROGRESS_EVERY_S = 5.0

COMMIT_RESTORED_EVERY_S = 2.0
"""How often a transactional store commits what it restored so far, with the offset reached: a
restore killed midway resumes from there (exactly-once; the records are committed ones)."""


@dataclass(slots=True)
class RestoreResult:
    """Records replayed per changelog partition and the offsets the stores are now at."""

    restored: dict[TopicPartition, int] = field(default_factory=dict)
    end_offsets: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.restored.values())


def _commit_restored(by_tp: Mapping[TopicPartition, ChangelogPartition], restored_to: dict[TopicPartition, int]) -> None:
    """Transactional stores commit what they restored so far (the task commits them all once restored)."""
    for ktp, next_offset in restored_to.items():
        commit = by_tp[ktp].commit
        if commit is not None:
            commit(next_offset)
    restored_to.clear()


class StoreChangelogReader:
    """Replays changelog partitions with one thread's restore consumer."""

    def __init__(
        self, restore_consumer: clients.Consumer, *, log_prefix: str = "", on_progress: Callable[[], None] | None = None
    ) -> None:
        self._consumer = restore_consumer
        self._log_prefix = log_prefix
        self._on_progress = on_progress
        """Called after each batch that restored records: a streams group member's poll timer counts them
        as polls (the restore runs inside its assignment callback; Kafka Streams polls between batches)."""
        self.total_restored = 0

    async def restore(self, task_name: str, partitions: list[ChangelogPartition]) -> RestoreResult:
        """Bring every store of one task up to its changelog's end; returns what was replayed."""
        result = RestoreResult()
        if not partitions:
            return result
        consumer = self._consumer
        began = time.monotonic()
        by_tp = {p.partition: p for p in partitions}
        if consumer.assignment():
            # the standby changelogs it reads are at their end: a fetch the broker holds for fetch.max.wait.ms,
            # which the end-offset request below would wait behind; restoring comes first, standbys resume after
            consumer.assign([])
        ends = dict(await consumer.end_offsets(list(by_tp)))
        remaining: set[TopicPartition] = set()
        for ktp, cp in by_tp.items():
            end = ends[ktp] if cp.end_offset is None else min(ends[ktp], cp.end_offset)
            ends[ktp] = end
            start = cp.start_offset
            if start is not None and start > end:
                raise TaskCorruptedError(
                    f"task {task_name}: checkpoint {start} of {cp.partition} is beyond the changelog end {end}"
                )
            result.end_offsets[cp.partition] = end
            result.restored[cp.partition] = 0
            if end > 0 and (start is None or start < end):
                remaining.add(ktp)
        if remaining:
            # only what has records to replay is assigned: an assigned partition at its end is fetched, and the
            # broker holds that fetch for fetch.max.wait.ms, which the next task's offset request waits behind
            consumer.assign(remaining)
            try:
                for ktp in remaining:
                    start = by_tp[ktp].start_offset
                    if start is None:
                        await consumer.seek_to_beginning(ktp)
                    else:
                        consumer.seek(ktp, start)
                await self._replay(task_name, by_tp, ends, remaining, result)
            finally:
                consumer.assign([])
        self.total_restored += result.total
        if result.total:
            log.info(
                "%stask %s: restored %d records from %s in %.2f s",
                self._log_prefix, task_name, result.total,
                {str(tp): n for tp, n in result.restored.items()}, time.monotonic() - began,
                extra={"task": task_name},
            )
        return result

    async def _replay(
        self,
        task_name: str,
        by_tp: Mapping[TopicPartition, ChangelogPartition],
        ends: Mapping[TopicPartition, int],
        remaining: set[TopicPartition],
        result: RestoreResult,
    ) -> None:
        consumer = self._consumer
        started = last_report = last_commit = time.monotonic()
        total_to_restore = None
        restored_to: dict[TopicPartition, int] = {}
        while remaining:
            try:
                batch = await consumer.getmany(*remaining, timeout_ms=200, max_records=10_000)
            except clients.OffsetOutOfRangeError as exc:
                raise TaskCorruptedError(f"task {task_name}: the changelog no longer has the restore position: {exc!r}") from exc
            for ktp, records in batch.items():
                cp = by_tp[ktp]
                if cp.end_offset is not None:  # a fetch may run past a committed-offset limit
                    records = [r for r in records if r.offset < ends[ktp]]
                cp.apply(records)
                result.restored[cp.partition] += len(records)
                if records:
                    restored_to[ktp] = records[-1].offset + 1
            if restored_to and self._on_progress is not None:
                self._on_progress()
            for ktp in list(remaining):
                if await consumer.position(ktp) >= ends[ktp]:
                    remaining.discard(ktp)
            now = time.monotonic()
            if remaining and restored_to and now - last_commit >= COMMIT_RESTORED_EVERY_S:
                last_commit = now
                _commit_restored(by_tp, restored_to)
            if remaining and now - last_report >= _PROGRESS_EVERY_S:
                last_report = now
                if total_to_restore is None:
                    total_to_restore = sum(ends[k] for k in by_tp)
                self._report(task_name, result.total, total_to_restore, now - started)

    def _report(self, task_name: str, done: int, approx_total: int, elapsed: float) -> None:
        rate = done / elapsed if elapsed else 0.0
        log.info(
            "%stask %s: restoring, %d records so far (changelog holds up to %d offsets), %.0f records/s",
            self._log_prefix, task_name, done, approx_total, rate,
        )
        if sys.stderr.isatty():
            sys.stderr.write(f"\rrestoring {task_name}: {done}/{approx_total} records ({rate:.0f}/s)")
            sys.stderr.flush()

    # -- standby tasks: kept up to date with the same consumer between restorations (as Kafka Streams' reader)

    async def assign_standby_partitions(self, starts: Mapping[TopicPartition, int | None]) -> None:
        """Read the standby tasks' changelogs from now on, each from its checkpoint (None: the beginning)."""
        consumer = self._consumer
        consumer.assign(starts)
        for tp, offset in starts.items():
            if offset is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, offset)

    async def poll_standby(self, max_records: int) -> Mapping[TopicPartition, Sequence[clients.RawRecord]]:
        """Whatever the standby changelogs have now, up to `max_records` (no waiting)."""
        return await self._consumer.getmany(timeout_ms=0, max_records=max_records)

    async def reached_ends(self, partitions: Iterable[TopicPartition]) -> bool:
        """Whether every partition is read up to its high watermark as of the last fetch."""
        for tp in partitions:
            end = self._consumer.highwater(tp)
            if end is None or await self._consumer.position(tp) < end:
                return False
        return True

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._consumer.highwater(partition)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._consumer.end_offsets(partitions)
