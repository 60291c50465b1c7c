"""TaskManager, StreamTask and StandbyTask over the fake clients, without a stream thread: task
creation with restore, stale fetches, commit offsets and checkpoints, closing, standby updates."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streams_core import StreamsConfig, TaskId
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import TaskDirectoryLockedError
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader
from streams_core.runtime.tasks import task_manager
from streams_core.runtime.tasks.flow_control import FlowControl
from streams_core.runtime.tasks.processing_guarantee import processing_guarantee
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.task_manager import PROCESS_CHUNK, TaskManager
from streams_core.runtime.tasks.topic_partition_metadata import encode_partition_time
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer, FakeProducer, FakeRecord

from .harness import APP, CHANGELOG, counting_topology, long, streams_config

T00 = TaskId(0, 0)
IN0, CL0 = TopicPartition("in", 0), TopicPartition(CHANGELOG, 0)


class Harness:
    """A TaskManager with an at-least-once guarantee over a fake producer and consumers."""

    def __init__(self, cluster: FakeKafkaCluster, tmp_path: Path, *, guarantee: str = "at_least_once") -> None:
        self.cluster = cluster
        config = StreamsConfig(streams_config(tmp_path, {"processing.guarantee": guarantee}))
        topology = counting_topology()
        builder = topology.internal_topology_builder
        builder.set_application_id(APP)
        builder.apply_config(config)
        self.producer = FakeProducer(cluster, client_id="producer")
        self.consumer = FakeConsumer(cluster, client_id="main", group_id=APP)
        self.restore_consumer = FakeConsumer(cluster, client_id="restore", group_id=None, auto_offset_reset="none")
        self.collector = RecordCollectorImpl(self.producer)
        def new_producer(transactional_id: str) -> FakeProducer:
            return FakeProducer(cluster, client_id=transactional_id, transactional_id=transactional_id)

        guarantee = processing_guarantee(config, self.collector, self.consumer, new_producer)
        self.tm = TaskManager(
            TopologyMetadata(builder, APP), config, guarantee, StoreChangelogReader(self.restore_consumer),
            flow_control=FlowControl.for_config(self.consumer, config), wall_clock=lambda: 0,
        )
        self.guarantee = guarantee
        self.task_dir = tmp_path / "state-0" / APP / str(T00)

    async def start(self) -> None:
        await self.producer.start()

    def store(self, standby: bool = False) -> Any:
        task = self.tm.standby_tasks[T00] if standby else self.tm.tasks[T00]
        return task.state_manager.get_store("counts")


class NoRebalanceListener:
    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        return None


def new_cluster() -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", CHANGELOG):
        cluster.create_topic(topic)
    return cluster


def records(cluster: FakeKafkaCluster, *words: str) -> list[FakeRecord]:
    return [cluster.produce("in", w, w, timestamp=i, partition=0) for i, w in enumerate(words)]


async def test_a_new_task_is_restored_before_its_processors_start(tmp_path: Path) -> None:
    cluster = new_cluster()
    cluster.produce(CHANGELOG, "a", long(4), partition=0)
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    task = h.tm.tasks[T00]
    assert task.restored_records == 1 and h.tm.restored_records == 1
    assert h.store().get("a") == 4
    assert task.state_manager.changelog_offsets == {CL0: 1}
    assert h.tm.prev_active == frozenset({T00})
    await h.tm.close_all()


async def test_records_of_a_partition_no_task_owns_are_refused(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    assert h.tm.add_records(TopicPartition("in", 5), records(cluster, "x")) == -1
    assert h.tm.add_records(IN0, records(cluster, "a", "b")) == 2
    await h.tm.close_all()


async def test_exactly_once_resumes_where_the_fenced_owner_committed_last(tmp_path: Path) -> None:
    """The previous owner, dropped from the group but still processing, commits a transaction
    after the consumer read the committed offsets at assignment: the task, once its producer
    fenced that owner, reads them again and seeks there; what a poll fetched before the seek is
    taken only from that offset on."""
    cluster = new_cluster()
    fetched_before = records(cluster, "a", "b", "c", "d")
    old_owner = FakeProducer(cluster, client_id="old", transactional_id=f"{APP}-{T00}")
    await old_owner.start()
    await old_owner.begin_transaction()
    await old_owner.send_offsets_to_transaction({IN0: 1}, APP)
    await old_owner.commit_transaction()
    h = Harness(cluster, tmp_path, guarantee="exactly_once_v2")
    await h.start()
    h.consumer.assign([IN0])
    assert await h.consumer.position(IN0) == 1, "the read at assignment"
    await old_owner.begin_transaction()
    await old_owner.send_offsets_to_transaction({IN0: 3}, APP)
    await old_owner.commit_transaction()
    await h.tm.handle_assignment({T00: [IN0]})
    assert await h.consumer.position(IN0) == 3
    assert h.tm.add_records(IN0, fetched_before) == 1, "only offset 3 ('d') of the batch fetched from 1"
    assert h.tm.add_records(IN0, fetched_before[2:]) == 1, "a fetch again from the seek adds nothing twice"
    assert h.tm.tasks[T00].committable_offsets() == {IN0: 3}
    await h.tm.close_all(clean=False)


async def test_at_least_once_keeps_the_position_read_at_assignment(tmp_path: Path) -> None:
    cluster = new_cluster()
    batch = records(cluster, "a", "b", "c")
    cluster.produce("in", "d", "d", timestamp=3, partition=0)
    h = Harness(cluster, tmp_path)
    await h.start()
    h.consumer.assign([IN0])
    assert await h.consumer.position(IN0) == 0
    await h.tm.handle_assignment({T00: [IN0]})
    assert await h.guarantee.resume_positions([IN0]) == {}
    assert h.tm.add_records(IN0, batch) == 3
    await h.tm.close_all()


async def test_process_prepare_commit_and_checkpoint(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    h.tm.add_records(IN0, records(cluster, "a", "b", "a"))
    assert h.tm.process(10, 0) == 3
    assert h.tm.processed_records == 3
    await h.guarantee.send_pending(h.tm.tasks.values())
    prepared = h.tm.prepare_commit()
    assert [offsets for _, offsets in prepared] == [{IN0: OffsetAndMetadata(3, encode_partition_time(2))}], (
        "the next offset, with the highest timestamp processed as the partition time"
    )
    h.consumer.subscribe(["in"], NoRebalanceListener())  # a group member, so that its commits are accepted
    await h.consumer.start()
    await cluster.wait_stable(APP)
    assert await h.guarantee.commit(prepared)
    assert cluster.committed_with_metadata(APP) == {IN0: OffsetAndMetadata(3, "AgAAAAAAAAAC")}
    assert OffsetCheckpoint(h.task_dir / CHECKPOINT_FILE_NAME).read() == {(CHANGELOG, 0): 3}
    assert h.tm.prepare_commit() == [], "nothing new to commit"
    await h.tm.close_all()
    await h.consumer.stop()


async def test_the_committed_partition_time_counts_only_the_records_processed(tmp_path: Path) -> None:
    """Records still buffered lie past the committed offset: their timestamps are not in its
    partition time (Kafka's RecordQueue raises it as a record is polled)."""
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    h.tm.add_records(IN0, [cluster.produce("in", w, w, timestamp=t, partition=0) for w, t in (("a", 7), ("b", 9), ("c", 8))])
    assert h.tm.process(1, 0) == 1
    assert [offsets for _, offsets in h.tm.prepare_commit()] == [{IN0: OffsetAndMetadata(1, encode_partition_time(7))}]
    assert h.tm.process(2, 0) == 2
    assert [offsets for _, offsets in h.tm.prepare_commit()] == [{IN0: OffsetAndMetadata(3, encode_partition_time(9))}]
    await h.tm.close_all()


async def test_an_unassigned_task_is_closed_and_its_state_checkpointed(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    h.tm.add_records(IN0, records(cluster, "a"))
    h.tm.process(10, 0)
    await h.collector.flush()
    h.tm.tasks[T00].post_commit(h.collector.offsets)
    await h.tm.handle_assignment({})
    assert h.tm.tasks == {}
    assert OffsetCheckpoint(h.task_dir / CHECKPOINT_FILE_NAME).read() == {(CHANGELOG, 0): 1}
    assert h.tm.local_state_offset_sums() == {T00: 1}
    assert h.tm.processed_records == 1, "closed tasks still count"


async def test_a_standby_task_applies_changelog_records_and_checkpoints(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({}, {T00: [IN0]})
    assert h.tm.standby_start_offsets() == {CL0: None}, "no checkpoint: from the beginning"
    changelog = [cluster.produce(CHANGELOG, k, long(v), partition=0) for k, v in (("a", 1), ("b", 2), ("a", 3))]
    h.tm.update_standby(CL0, changelog)
    assert (h.store(standby=True).get("a"), h.store(standby=True).get("b")) == (3, 2)
    assert h.tm.standby_tasks[T00].updated_records == 3
    h.tm.checkpoint_standbys()
    assert OffsetCheckpoint(h.task_dir / CHECKPOINT_FILE_NAME).read() == {(CHANGELOG, 0): 3}
    await h.tm.close_all()
    h2 = Harness(cluster, tmp_path)
    await h2.start()
    await h2.tm.handle_assignment({}, {T00: [IN0]})
    assert h2.tm.standby_start_offsets() == {CL0: 3}, "a restarted standby continues from its checkpoint"
    await h2.tm.close_all()


async def test_an_exactly_once_standby_commits_its_stores_with_their_offsets(tmp_path: Path) -> None:
    """Standby updates are read_committed records: the store commits them with the offsets reached,
    so a standby killed without a checkpoint continues from its store file (no wipe)."""
    cluster = new_cluster()
    h = Harness(cluster, tmp_path, guarantee="exactly_once_v2")
    await h.start()
    await h.tm.handle_assignment({}, {T00: [IN0]})
    changelog = [cluster.produce(CHANGELOG, k, long(v), partition=0) for k, v in (("a", 1), ("b", 2))]
    h.tm.update_standby(CL0, changelog)
    h.tm.checkpoint_standbys()
    standby_state = h.tm.standby_tasks[T00].state_manager
    assert standby_state.transactional_stores == ["counts"]
    h.tm.update_standby(CL0, [cluster.produce(CHANGELOG, "a", long(3), partition=0)])
    # a crash before the next checkpoint: the stores close without a commit, no checkpoint is written
    h.tm.standby_tasks.pop(T00).processor.close()
    (h.task_dir / CHECKPOINT_FILE_NAME).unlink(missing_ok=True)
    await h.tm.close_all()
    h2 = Harness(cluster, tmp_path, guarantee="exactly_once_v2")
    await h2.start()
    await h2.tm.handle_assignment({}, {T00: [IN0]})
    assert h2.tm.standby_start_offsets() == {CL0: 2}, "from the store file's offsets: the last update was not committed"
    assert (h2.store(standby=True).get("a"), h2.store(standby=True).get("b")) == (1, 2), "not wiped"
    await h2.tm.close_all()


async def test_a_processing_slice_ends_at_its_deadline_within_one_chunk(tmp_path: Path) -> None:
    """A time-bounded slice (what the stream thread uses, so queries get the loop): an expired
    deadline stops after one chunk; the rest is processed by later slices, in order."""
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({T00: [IN0]})
    words = [f"w{i % 7}" for i in range(3 * PROCESS_CHUNK + 5)]
    h.tm.add_records(IN0, records(cluster, *words))
    assert h.tm.process(1000, 0, slice_s=0.0) == PROCESS_CHUNK
    assert h.tm.process(2 * PROCESS_CHUNK, 0, slice_s=60.0) == 2 * PROCESS_CHUNK, "bounded by the count too"
    assert h.tm.process(1000, 0, slice_s=60.0) == 5
    assert h.tm.process(1000, 0, slice_s=60.0) == 0
    assert h.store().get("w0") == words.count("w0")
    await h.tm.close_all()


async def test_a_standby_with_damaged_state_is_wiped_and_starts_from_the_beginning(tmp_path: Path) -> None:
    """Issue 15: standby tasks go through the same detection as active ones (never fatal, never trusted)."""
    cluster = new_cluster()
    h = Harness(cluster, tmp_path)
    await h.start()
    await h.tm.handle_assignment({}, {T00: [IN0]})
    h.tm.update_standby(CL0, [cluster.produce(CHANGELOG, k, long(v), partition=0) for k, v in (("a", 1), ("b", 2))])
    await h.tm.close_all()
    (h.task_dir / "counts.sqlite").write_bytes(b"")  # the file lost, the checkpoint still says offset 2

    h2 = Harness(cluster, tmp_path)
    await h2.start()
    await h2.tm.handle_assignment({}, {T00: [IN0]})
    assert h2.tm.corrupted_tasks == 1
    assert h2.tm.standby_start_offsets() == {CL0: None}, "not from the checkpoint of a lost file"
    await h2.tm.close_all()


async def _hold_lock(directory: Path, seconds: float) -> asyncio.subprocess.Process:
    """Another process holding the task directory's lock for `seconds` (a worker yet to give the task up)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); os.pwrite(fd, f'{os.getpid()}\\n'.encode(), 0); "
        "print('held', flush=True); time.sleep(float(sys.argv[2]))"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(directory / ".lock"), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None and await holder.stdout.readline() == b"held\n"
    return holder


async def test_a_task_whose_directory_another_process_still_holds_is_created_once_it_is_released(tmp_path: Path) -> None:
    h = Harness(new_cluster(), tmp_path)
    await h.start()
    holder = await _hold_lock(h.task_dir, 0.5)
    began = time.monotonic()
    await h.tm.handle_assignment({T00: [IN0]})
    assert T00 in h.tm.tasks and time.monotonic() - began >= 0.3, "waited for the holder, then created it"
    await holder.wait()
    await h.tm.close_all()


async def test_a_directory_held_past_the_wait_fails_the_assignment_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_manager, "TASK_LOCK_WAIT_S", 0.3)
    h = Harness(new_cluster(), tmp_path)
    await h.start()
    holder = await _hold_lock(h.task_dir, 5.0)
    try:
        with pytest.raises(TaskDirectoryLockedError, match=rf"locked by another process \(pid {holder.pid}\)"):
            await h.tm.handle_assignment({T00: [IN0]})
        assert T00 not in h.tm.tasks
    finally:
        holder.kill()
        await holder.wait()
