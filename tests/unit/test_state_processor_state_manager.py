"""ProcessorStateManager: task directory and lock, registration, flush/close order and failures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ProcessorStateError
from streams_core.serde import Serdes
from streams_core.state import Stores
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.position_checkpoint import PositionCheckpoint
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from streams_core.common.task_id import TaskId
    from streams_core.state.internals.processor_state_manager import ProcessorStateManager
    manager = ProcessorStateManager(TaskId(0, 0), "app", Path(sys.argv[1]))
    print("locked", flush=True)
    sys.stdin.readline()
    manager.close()
    """
)


class RecordingStore(InMemoryKeyValueStore):
    """Records flush and close calls in a shared log; can be told to fail."""

    def __init__(self, name: str, log: list[str], fail: str = "") -> None:
        super().__init__(name)
        self.log = log
        self.fail = fail

    def flush(self) -> None:
        self.log.append(f"flush {self.name}")
        if self.fail == "flush":
            raise OSError(f"{self.name} cannot flush")

    def close(self) -> None:
        self.log.append(f"close {self.name}")
        super().close()
        if self.fail == "close":
            raise OSError(f"{self.name} cannot close")


def test_creates_and_locks_the_task_directory(tmp_path: Path) -> None:
    task_dir = tmp_path / "app" / "1_2"
    manager = ProcessorStateManager(TaskId(1, 2), "app", task_dir)
    assert task_dir.is_dir() and (task_dir / ".lock").exists()
    assert manager.task_dir == task_dir and manager.task_id == TaskId(1, 2) and manager.application_id == "app"
    assert manager.checkpoint_file.path == task_dir / ".checkpoint"
    context = manager.context
    assert (context.application_id, context.task_id, context.state_dir) == ("app", TaskId(1, 2), task_dir)
    with pytest.raises(ProcessorStateError, match="locked by another process"):
        ProcessorStateManager(TaskId(1, 2), "app", task_dir)
    manager.close()
    ProcessorStateManager(TaskId(1, 2), "app", task_dir).close()


def test_a_lock_held_by_another_process_blocks_until_it_exits(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_0"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(task_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(ProcessorStateError, match=rf"locked by another process \(pid {holder.pid}\)"):
            ProcessorStateManager(TaskId(0, 0), "app", task_dir)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    assert holder.returncode == 0
    ProcessorStateManager(TaskId(0, 0), "app", task_dir).close()


def test_register_get_store_and_registration_order(tmp_path: Path) -> None:
    with ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "t") as manager:
        for name in ("b", "a", "c"):
            store = Stores.key_value_store_builder(
                Stores.persistent_key_value_store(name), Serdes.String(), Serdes.String()
            ).build()
            store.init(manager.context, store)
        assert list(manager.stores) == ["b", "a", "c"]
        assert manager.get_store("a") is manager.stores["a"]
        assert manager.get_store("nope") is None
        assert (tmp_path / "t" / "a.sqlite").exists()
        duplicate = InMemoryKeyValueStore("a")
        with pytest.raises(ProcessorStateError, match="'a' is already registered"):
            duplicate.init(manager.context, duplicate)


def test_flush_and_close_go_in_registration_order(tmp_path: Path) -> None:
    log: list[str] = []
    manager = ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "t")
    for name in ("second", "first", "third"):
        store = RecordingStore(name, log)
        store.init(manager.context, store)
    manager.flush()
    manager.close()
    manager.close()
    assert log == ["flush second", "flush first", "flush third", "close second", "close first", "close third"]
    assert manager.stores == {}
    with pytest.raises(ProcessorStateError, match="closed"):
        InMemoryKeyValueStore("late").init(manager.context, InMemoryKeyValueStore("late"))


def test_a_failing_store_does_not_stop_the_others(tmp_path: Path) -> None:
    log: list[str] = []
    manager = ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "t")
    for name, fail in (("ok", ""), ("bad", "flush"), ("worse", "close"), ("last", "")):
        store = RecordingStore(name, log, fail)
        store.init(manager.context, store)
    with pytest.raises(ProcessorStateError, match="failed to flush store 'bad'"):
        manager.flush()
    assert log[-1] == "flush last"
    with pytest.raises(ProcessorStateError, match="failed to close store 'worse'"):
        manager.close()
    assert log[-1] == "close last"
    ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "t").close()


def test_a_changelog_topic_over_the_limit_is_refused(tmp_path: Path) -> None:
    with ProcessorStateManager(TaskId(0, 0), "a" * 200, tmp_path / "t") as manager:
        store = InMemoryKeyValueStore("s" * 40)
        with pytest.raises(ProcessorStateError, match="over Kafka's limit"):
            store.init(manager.context, store)


def test_an_uncreatable_directory_is_a_processor_state_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ProcessorStateError, match="cannot create state directory"):
        ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "file" / "0_0")


CL = TopicPartition("app-counts-changelog", 3)
OTHER = TopicPartition("app-other-changelog", 3)


def _logged(tmp_path: Path) -> ProcessorStateManager:
    return ProcessorStateManager(TaskId(0, 3), "app", tmp_path / "0_3", changelog_partitions={"counts": CL})


def test_changelog_offsets_come_from_the_checkpoint_and_only_for_its_logged_stores(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    manager.checkpoint_file.write({(CL.topic, CL.partition): 40, (OTHER.topic, OTHER.partition): 7})
    assert manager.has_checkpoint
    assert manager.load_checkpoint() == {CL: 40} and manager.changelog_offsets == {CL: 40}


def test_restore_starts_at_the_checkpoint_or_the_beginning(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    restored: list[object] = []
    manager.register(InMemoryKeyValueStore("counts"), restored.append)
    [fresh] = manager.changelogs_to_restore()
    assert (fresh.store_name, fresh.partition, fresh.start_offset) == ("counts", CL, None)
    manager.checkpoint_file.write({(CL.topic, CL.partition): 12})
    manager.load_checkpoint()
    assert manager.changelogs_to_restore()[0].start_offset == 12


def test_commits_advance_the_offsets_and_checkpoint_writes_them(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    manager.update_changelog_offsets({CL: 5, OTHER: 99, TopicPartition("out", 0): 3})
    assert manager.changelog_offsets == {CL: 5}, "partitions of other tasks or outputs are not the state's"
    manager.checkpoint()
    assert manager.checkpoint_file.read() == {(CL.topic, CL.partition): 5}
    manager.delete_checkpoint()
    assert not manager.has_checkpoint


def test_wipe_deletes_store_files_and_checkpoint_but_keeps_the_lock(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    (manager.task_dir / "counts.sqlite").write_bytes(b"data")
    manager.update_changelog_offsets({CL: 5})
    manager.checkpoint()
    manager.wipe()
    assert sorted(p.name for p in manager.task_dir.iterdir()) == [".lock"]
    assert manager.changelog_offsets == {}
    manager.register(InMemoryKeyValueStore("counts"))
    with pytest.raises(ProcessorStateError, match="while stores are open"):
        manager.wipe()


IN = TopicPartition("in", 3)


def test_the_position_is_written_before_the_checkpoint_loaded_with_it_and_removed_with_it(tmp_path: Path) -> None:
    """Kafka's RocksDBStore saves its position (`<store>.position`) in the commit callback the
    checkpoint runs first; ours is the task's `.position`, which a standby's checkpoint leaves as it is."""
    manager = _logged(tmp_path)
    manager.update_changelog_offsets({CL: 5})
    manager.checkpoint({IN: 41})
    assert PositionCheckpoint(manager.task_dir / ".position").read() == {IN: 41}
    manager.checkpoint()  # a standby's: no position of its own
    manager.close()
    reopened = _logged(tmp_path)
    assert reopened.loaded_position == {}, "read only with the checkpoint"
    reopened.load_checkpoint()
    assert reopened.loaded_position == {IN: 41}
    reopened.delete_checkpoint()  # exactly-once, while the task runs
    assert not (reopened.task_dir / ".position").exists() and reopened.loaded_position == {IN: 41}
    reopened.close()


def test_no_position_is_written_without_offsets_to_checkpoint_and_an_empty_one_removes_the_file(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    manager.checkpoint({IN: 41})
    assert not (manager.task_dir / ".position").exists(), "no checkpoint to go with it (in-memory stores restart empty)"
    manager.update_changelog_offsets({CL: 5})
    manager.checkpoint({IN: 41})
    manager.checkpoint({})
    assert not (manager.task_dir / ".position").exists()


def test_a_wipe_drops_the_position(tmp_path: Path) -> None:
    manager = _logged(tmp_path)
    manager.update_changelog_offsets({CL: 5})
    manager.checkpoint({IN: 41})
    manager.load_checkpoint()
    manager.wipe(keep_store_files=True)
    assert manager.loaded_position == {} and not (manager.task_dir / ".position").exists()
    assert manager.load_checkpoint() == {} and manager.loaded_position == {}


def test_a_corrupt_position_file_is_dropped_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manager = _logged(tmp_path)
    manager.update_changelog_offsets({CL: 5})
    manager.checkpoint({IN: 41})
    (manager.task_dir / ".position").write_text("0\n2\nin 3 41\n")
    assert manager.load_checkpoint() == {CL: 5}, "the stores' offsets are still trusted"
    assert manager.loaded_position == {} and "ignoring the saved IQv2 position" in caplog.text
    assert not (manager.task_dir / ".position").exists()
