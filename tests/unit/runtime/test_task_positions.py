"""IQv2 positions across a task's close and reopen from local state (Kafka's RocksDBStore `.position`):
saved with the checkpoint as of the last commit, loaded when the task reopens, dropped with the state."""

from __future__ import annotations

from pathlib import Path

from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.position_checkpoint import POSITION_FILE_NAME, PositionCheckpoint

from .test_task_manager import IN0, T00, Harness, new_cluster, records


async def _committed(h: Harness, *words: str) -> StreamTask:
    """A task of `h` that processed `words` (offsets on from the partition's end) and committed them."""
    task = h.tm.tasks[T00]
    h.tm.add_records(IN0, records(h.cluster, *words))
    h.tm.process(100, 0)
    await h.guarantee.send_pending(h.tm.tasks.values())
    prepared = h.tm.prepare_commit()
    if h.tm.tasks[T00].state_manager.transactional_stores:
        assert await h.guarantee.commit(prepared)
    else:  # at-least-once: the consumer's commit needs a group; the task's side of it is what counts here
        await h.collector.flush()
        task.post_commit(h.collector.offsets)
    return task


async def _reopened(cluster: object, tmp_path: Path, guarantee: str = "at_least_once") -> Harness:
    h = Harness(cluster, tmp_path, guarantee=guarantee)  # type: ignore[arg-type]
    await h.start()
    h.consumer.assign([IN0])  # exactly-once seeks the new task's partitions to their committed offsets
    await h.tm.handle_assignment({T00: [IN0]})
    return h


async def test_a_task_reopened_from_local_state_has_the_position_of_its_last_commit(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = await _reopened(cluster, tmp_path)
    assert h.tm.input_position(T00) == {}, "nothing processed, nothing saved"
    task = await _committed(h, "a", "b", "c")
    assert PositionCheckpoint(h.task_dir / POSITION_FILE_NAME).read() == {IN0: 2}, "with the commit's checkpoint"
    h.tm.add_records(IN0, records(cluster, "d"))
    h.tm.process(100, 0)
    assert task.position == {IN0: 3}, "queries see what was processed"
    await h.tm.close_all()  # offset 3 was never committed: it will be processed again

    h2 = await _reopened(cluster, tmp_path)
    assert h2.tm.input_position(T00) == {IN0: 2}, "the position saved with the checkpoint, not empty"
    assert h2.store().get("c") == 1
    h2.tm.add_records(IN0, cluster.records("in", partition=0)[3:])
    h2.tm.process(100, 0)
    assert h2.tm.input_position(T00) == {IN0: 3}, "processing moves it on"
    await h2.tm.close_all()


async def test_exactly_once_saves_the_position_on_a_clean_close_and_a_crash_drops_it(tmp_path: Path) -> None:
    """Under exactly-once the checkpoint and the position are removed while the task runs: a crash leaves
    neither, and the state manager wipes what cannot say how far it is, the position with it (Kafka wipes
    the whole task directory there); the SQLite store file stays, with its committed data."""
    cluster = new_cluster()
    h = await _reopened(cluster, tmp_path, "exactly_once_v2")
    await _committed(h, "a", "b")
    assert not (h.task_dir / POSITION_FILE_NAME).exists(), "removed while the task runs"
    await h.tm.close_all()
    assert PositionCheckpoint(h.task_dir / POSITION_FILE_NAME).read() == {IN0: 1}

    h2 = await _reopened(cluster, tmp_path, "exactly_once_v2")
    assert h2.tm.input_position(T00) == {IN0: 1}
    await _committed(h2, "c")
    assert h2.tm.input_position(T00) == {IN0: 2}
    await h2.tm.close_all(clean=False)  # a crash: no checkpoint, no position

    h3 = await _reopened(cluster, tmp_path, "exactly_once_v2")
    assert h3.tm.input_position(T00) == {}, "nothing says how far it is until it processes a record"
    assert (h3.store().get("a"), h3.store().get("c")) == (1, 1), "the store itself is whole"
    await h3.tm.close_all(clean=False)


async def test_state_wiped_as_corrupt_loses_its_position(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = await _reopened(cluster, tmp_path)
    await _committed(h, "a")
    await h.tm.close_all()
    (h.task_dir / "counts.sqlite").write_bytes(b"")  # the store's file lost, the checkpoint kept
    h2 = await _reopened(cluster, tmp_path)
    assert h2.tm.corrupted_tasks == 1 and h2.tm.input_position(T00) == {}
    assert h2.store().get("a") == 1, "restored from the changelog, which carries no positions"
    await h2.tm.close_all()


async def test_a_standby_keeps_the_position_its_last_active_period_saved(tmp_path: Path) -> None:
    """A standby's checkpoints leave `.position` alone: its stores only grow past it, so the task,
    active here again, starts from that (older) position, still a true lower bound."""
    cluster = new_cluster()
    h = await _reopened(cluster, tmp_path)
    await _committed(h, "a", "b")
    await h.tm.handle_assignment({}, {T00: [IN0]})
    h.tm.checkpoint_standbys()
    await h.tm.handle_assignment({T00: [IN0]})
    assert h.tm.input_position(T00) == {IN0: 1}
    await h.tm.close_all()
