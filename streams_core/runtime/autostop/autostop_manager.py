"""AutostopManager: one instance's side of the KIP-95 metadata topic (`autostop.at=eol`).

It tails the metadata partition with a consumer that has no group (assigned, from the
beginning, never committing), so every instance knows the current run's stop offsets and the
done notifications; and it writes: the leader's stop offsets at a run's start (all or nothing:
a completed marker follows them), the done notifications of finished tasks, and the finished
marker. Input stop offsets are last stable offsets (read_committed end offsets), so a run never
waits for an open or aborted transaction.

One run per instance: the run state is fixed at the instance's first assignment and kept across
its later rebalances. The finished marker is written at most once per run: of the instances that
see every partition done, the one whose claim record comes first in the log writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.processor.internals.internal_topology_builder import TopicsInfo
from streams_core.runtime.autostop.autostop_metadata import (
    COMPLETED,
    FINISHED,
    AutostopLog,
    IntermediateWriters,
    RunState,
    claim_key,
    done_key,
    metadata_topic_name,
    stop_key,
)

__all__ = ["AutostopManager", "intermediate_writers"]

log = logging.getLogger(__name__)

_TAIL_INTERVAL_MS = 100
_TAIL_BACKOFF_S = 0.1


class AutostopManager:
    """Reads and writes the metadata topic of one application instance."""

    def __init__(
        self,
        config: StreamsConfig,
        client_supplier: clients.KafkaClientSupplier,
        *,
        input_partitions: Iterable[TopicPartition],
        writers: IntermediateWriters,
        intermediate_partitions: Iterable[TopicPartition] = (),
        process_id: str,
        wait_timeout_s: float = 60.0,
    ) -> None:
        self._config = config
        self._clients = client_supplier
        self.application_id: str = config["application.id"]
        self.topic = metadata_topic_name(self.application_id)
        self._partition = TopicPartition(self.topic, 0)
        self.input_partitions = frozenset(input_partitions)
        self.writers = writers
        self.intermediate_partitions = frozenset(intermediate_partitions)
        self._process_id = process_id
        self._wait_timeout = wait_timeout_s
        self._log = AutostopLog(self.application_id)
        self._state = RunState()
        self._run: RunState | None = None
        self._changed = asyncio.Condition()
        self._consumer: clients.Consumer | None = None
        self._producer: clients.Producer | None = None
        self._tailer: asyncio.Task[None] | None = None
        self._establishing = asyncio.Lock()
        self._read_up_to = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the tailing consumer (read_committed, for last stable offsets) and the producer."""
        committed = self._config.with_overrides({"global.consumer.isolation.level": "read_committed"})
        self._consumer = self._clients.get_global_consumer(committed)
        await self._consumer.start()
        self._consumer.assign([self._partition])
        await self._consumer.seek_to_beginning(self._partition)
        self._producer = self._clients.get_producer(self._config)
        await self._producer.start()
        self._tailer = asyncio.get_running_loop().create_task(self._tail(), name=f"{self.application_id}-autostop")

    async def close(self) -> None:
        if self._tailer is not None:
            self._tailer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._tailer
        for client in (self._producer, self._consumer):
            if client is not None:
                try:
                    await client.stop()
                except Exception:
                    log.exception("autostop [%s]: stopping a client failed", self.application_id)

    async def _tail(self) -> None:
        """Read the log for the instance's lifetime: a failed read (a leader moving on the new
        topic) is logged and retried, since every wait on the log depends on this task."""
        failures = 0
        while True:
            try:
                await self._tail_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                log.warning(
                    "autostop [%s]: reading %s failed (%d in a row), reading again: %r",
                    self.application_id, self.topic, failures, exc,
                )
                await asyncio.sleep(min(_TAIL_BACKOFF_S * failures, 1.0))

    async def _tail_once(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        batch = await consumer.getmany(self._partition, timeout_ms=_TAIL_INTERVAL_MS, max_records=10_000)
        records = batch.get(self._partition, ())
        for record in records:
            self._log.apply(record.key, record.value)
        position = await consumer.position(self._partition)
        if records or position != self._read_up_to:
            self._read_up_to = position
            self._state = self._log.state()
            async with self._changed:
                self._changed.notify_all()

    async def _wait_for(self, predicate_name: str, predicate: Callable[[RunState], bool]) -> RunState:
        """Wait until `predicate(state)` holds; StreamsError naming what was awaited after the timeout."""
        try:
            async with asyncio.timeout(self._wait_timeout):
                async with self._changed:
                    await self._changed.wait_for(lambda: predicate(self._state))
        except TimeoutError:
            raise StreamsError(
                f"autostop [{self.application_id}]: no {predicate_name} in {self.topic} after {self._wait_timeout:.0f} s"
            ) from None
        return self._state

    async def _end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets, asked again when a request times out (seen once right after the metadata
        topic was created, while its leader settled on a loaded broker)."""
        assert self._consumer is not None
        for attempt in range(1, 4):
            try:
                return await self._consumer.end_offsets(partitions)
            except clients.KafkaTimeoutError:
                if attempt == 3:
                    raise
                log.warning("autostop [%s]: end offsets timed out (attempt %d of 3); asking again", self.application_id, attempt)
        raise AssertionError("unreachable")

    async def _caught_up(self) -> RunState:
        """The state once the log is read to its current end."""
        end = (await self._end_offsets([self._partition]))[self._partition]
        return await self._wait_for("catch-up", lambda _state: self._read_up_to >= end)

    # -- the run ------------------------------------------------------------------------------

    @property
    def run(self) -> RunState | None:
        """The run this instance works in, once established."""
        return self._run

    async def establish_run(self, *, leader: bool, wait: bool = True) -> RunState | None:
        """At the instance's first assignment: reuse a run under way, or (leader) start a new one.

        The leader of a group whose log holds no valid run tombstones what the log holds, writes
        the stop offsets of every input partition and then the completed marker. Other members
        wait until a valid run appears; without `wait` (a member with no active task) they return
        None at once and learn the run later (`behind`, or their next assignment): under the streams
        protocol a member's first assignment is empty while the broker creates the internal topics,
        and waiting in it would keep the member from the assignment that makes it the leader.
        Later calls return the same run.

        Only the leader's start is serialised: the threads of one instance share this manager,
        and a non-leader thread waiting for the run must not hold up its sibling that is the
        group's leader and writes it.
        """
        if self._run is not None:
            return self._run
        state = await self._caught_up()
        if state.valid:
            log.info(
                "autostop [%s]: continuing the run under way (%d stop offsets)",
                self.application_id, len(state.stop_offsets),
            )
        elif leader:
            async with self._establishing:
                state = self._run if self._run is not None else await self._caught_up()
                if not state.valid:
                    state = await self._start_new_run(state)
        elif not wait:
            return None
        else:
            state = await self._wait_for("valid run", lambda s: s.valid)
        if self._run is None:
            self._run = state
        return self._run

    async def _start_new_run(self, previous: RunState) -> RunState:
        assert self._consumer is not None and self._producer is not None
        partitions = sorted(self.input_partitions)
        ends = await self._end_offsets(partitions) if partitions else {}
        records: list[tuple[bytes, bytes | None]] = [(key, None) for key in sorted(previous.keys)]
        records += [(stop_key(tp), str(ends[tp]).encode()) for tp in partitions]
        records.append((self.application_id.encode(), COMPLETED))
        await self._write(records)
        log.info(
            "autostop [%s]: new run: stop offsets %s (%d records of the previous run tombstoned)",
            self.application_id, {str(tp): ends[tp] for tp in partitions}, len(previous.keys),
        )
        return await self._wait_for("valid run", lambda s: s.valid)

    async def _write(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        producer = self._producer
        assert producer is not None
        batch = producer.create_batch()
        now = int(time.time() * 1000)
        for key, value in records:
            if batch.append(timestamp=now, key=key, value=value, headers=[]) is None:
                batch.close()
                await (await producer.send_batch(batch, self.topic, partition=0))
                batch = producer.create_batch()
                batch.append(timestamp=now, key=key, value=value, headers=[])
        batch.close()
        await (await producer.send_batch(batch, self.topic, partition=0))

    # -- stop offsets -------------------------------------------------------------------------

    def stop_offset(self, tp: TopicPartition) -> int | None:
        """Where `tp` stops in this run: an input's recorded offset, or an intermediate's once known."""
        run = self._run
        if run is None:
            return None
        if tp in self.input_partitions:
            return run.stop_offsets.get(tp)
        return self.writers.stop_offset(tp, self._state.done)

    def reported(self, sources: Iterable[TopicPartition], intermediates: Iterable[TopicPartition]) -> bool:
        done = self._state.done
        targets = list(intermediates)
        return all((source, tp) in done for source in sources for tp in targets)

    async def report_done(self, sources: Iterable[TopicPartition], intermediates: Iterable[TopicPartition]) -> None:
        """A task finished `sources`: record each intermediate partition's end offset, as seen now."""
        assert self._consumer is not None
        targets = sorted(intermediates)
        if not targets:
            return
        ends = await self._end_offsets(targets)
        await self._write([(done_key(source, tp), str(ends[tp]).encode()) for source in sorted(sources) for tp in targets])
        log.info(
            "autostop [%s]: %s done; intermediate end offsets %s",
            self.application_id, sorted(str(s) for s in sources), {str(tp): ends[tp] for tp in targets},
        )

    # -- the end of the run -------------------------------------------------------------------

    async def finish_if_done(self, admin: clients.Admin) -> bool:
        """Write the finished marker if every partition of the run is committed at its stop offset.

        Returns whether this instance wrote it. Runs after the instance's threads closed.
        """
        run = self._run
        if run is None:
            return False
        await self._caught_up()
        behind = await self.behind(admin)
        if behind is None or behind:
            log.info("autostop [%s]: not the last instance; partitions still to finish: %s", self.application_id, behind)
            return False
        return await self._write_finished_marker(run)

    async def behind(self, admin: clients.Admin) -> dict[str, tuple[int | None, int]] | None:
        """The run's partitions whose committed offset is below their stop offset, as
        "topic-p" -> (committed, stop); None while a stop offset is still unknown (no run yet, or
        an intermediate partition whose writers have not all reported)."""
        if self._run is None:
            if not self._state.valid:
                return None
            self._run = self._state  # an idle member (see `establish_run`) learns the run under way
        stops: dict[TopicPartition, int] = {}
        for tp in (*self.input_partitions, *self.intermediate_partitions):
            stop = self.stop_offset(tp)
            if stop is None:
                return None
            stops[tp] = stop
        committed = await admin.committed_offsets(self.application_id, list(stops))
        return {str(tp): (committed.get(tp), stop) for tp, stop in stops.items() if stop and (committed.get(tp) or 0) < stop}

    async def _write_finished_marker(self, run: RunState) -> bool:
        """Claim the marker, read the log back, and write it only if this claim came first."""
        await self._write([(claim_key(self._process_id), self._process_id.encode())])
        state = await self._caught_up()
        if state.finished or state.claimant != self._process_id or dict(state.stop_offsets) != dict(run.stop_offsets):
            log.info("autostop [%s]: another instance writes the finished marker", self.application_id)
            return False
        await self._write([(self.application_id.encode(), FINISHED)])
        log.info("autostop [%s]: the run is finished; finished marker written", self.application_id)
        return True


def intermediate_writers(
    topic_groups: Mapping[int, TopicsInfo], partition_counts: Mapping[str, int]
) -> tuple[IntermediateWriters, frozenset[TopicPartition]]:
    """The writers of every intermediate topic (sink of one sub-topology, source of another) and its partitions."""
    sources_of = {sid: info.source_topics for sid, info in topic_groups.items()}
    sinks_of = {sid: info.sink_topics for sid, info in topic_groups.items()}
    all_sources = frozenset().union(*sources_of.values()) if sources_of else frozenset()
    writers: dict[str, set[TopicPartition]] = {}
    for sid, sinks in sinks_of.items():
        for topic in sinks & all_sources:
            entry = writers.setdefault(topic, set())
            for source in sources_of[sid]:
                entry.update(TopicPartition(source, p) for p in range(partition_counts[source]))
    partitions = frozenset(TopicPartition(t, p) for t in writers for p in range(partition_counts[t]))
    return IntermediateWriters(writers), partitions
