"""What the state-recovery, exactly-once and standby tests share.

- `AppProcesses`: starts `counting_app` as real processes (`subprocess.Popen`), waits for their
  `RUNNING` line, kills them with SIGKILL or stops them with SIGTERM, and always reaps every
  child it started (use it as a context manager or through a fixture). Each child dies with the
  test process too (PR_SET_PDEATHSIG), and logs to `<tmp>/logs/<name>.log`.
  `kill_in_open_transaction` times a kill -9 to land while a transaction holds records.
- `running_instance`: the same application in this event loop (to read its tasks and stores),
  always closed at the end.
- `InputFeeder`: produces keyed input (to the counting app) in the background while instances are
  killed, and keeps the truth (how many records each key got).
- Reading back: latest value per key of the output or changelog, consumer group offsets,
  checkpoint files, and the store contents of an in-process `KafkaStreams` or of the SQLite
  files a stopped instance left.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import KafkaStreams, State, TaskId, Topology
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from tests.integration.apps.counting_app import STORE
from tests.kafka_utils import Consumed, read_all, topic_partitions

__all__ = [
    "AppProcess",
    "AppProcesses",
    "InputFeeder",
    "changelog_topic",
    "checkpoints",
    "committed_offsets",
    "decode_long",
    "end_offsets",
    "kill_in_open_transaction",
    "latest_by_key",
    "next_offsets_after_records",
    "not_one_to_n",
    "read_latest",
    "restored_by_task",
    "running_instance",
    "sequences_by_key",
    "sqlite_store_contents",
    "store_contents",
    "wait_all_committed",
]

REPO = Path(__file__).resolve().parents[3]
APP_MODULE = "tests.integration.apps.counting_app"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the forked child: get SIGKILL when the test process dies (no orphaned apps)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# -- processes -------------------------------------------------------------------------------


class AppProcess:
    """One running `counting_app`; stdout is read by a thread that collects its lines."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path, module: str = APP_MODULE) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=_die_with_parent,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"AppProcess({self.name}, pid {self.pid}, returncode {self.proc.returncode})"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def running_count(self) -> int:
        return sum(1 for line in self.lines if line == "RUNNING")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def wait_running(self, count: int = 1, timeout: float = 60.0) -> float:
        """Wait for the `count`-th RUNNING line; returns the seconds waited."""
        start = time.monotonic()
        while self.running_count() < count:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode} before RUNNING:\n{self.log_tail()}")
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{self.name} not RUNNING after {timeout} s:\n{self.log_tail()}")
            await asyncio.sleep(0.05)
        return time.monotonic() - start

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    async def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (a clean close) and wait for the exit; SIGKILL after `timeout`. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout} s of SIGTERM:\n{self.log_tail()}") from None

    def reap(self) -> None:
        """Kill if still running, wait, close the pipes and the log."""
        try:
            self.kill()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._log.close()


class AppProcesses:
    """Starts counting apps (or another app `module` taking the same arguments) of one test and
    kills whatever is left at the end."""

    def __init__(
        self, tmp_path: Path, bootstrap: str, app_id: str, input_topic: str, output_topic: str, module: str = APP_MODULE
    ) -> None:
        self.module = module
        self.tmp_path = tmp_path
        self.bootstrap = bootstrap
        self.app_id = app_id
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.started: list[AppProcess] = []

    def __enter__(self) -> AppProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reap_all()

    def state_dir(self, instance: str) -> Path:
        return self.tmp_path / instance

    def start(self, instance: str, guarantee: str = "at_least_once", *extra_args: str) -> AppProcess:
        """Start instance `instance` (its state dir is `<tmp>/<instance>`: a restart reuses it)."""
        args = [
            "--bootstrap",
            self.bootstrap,
            "--app-id",
            self.app_id,
            "--input",
            self.input_topic,
            "--output",
            self.output_topic,
            "--state-dir",
            str(self.state_dir(instance)),
            "--guarantee",
            guarantee,
            *extra_args,
        ]
        number = sum(1 for p in self.started if p.name.startswith(f"{instance}#")) + 1
        name = f"{instance}#{number}"
        process = AppProcess(name, args, self.tmp_path / "logs" / f"{name}.log", self.module)
        self.started.append(process)
        return process

    def reap_all(self) -> None:
        errors = []
        for process in self.started:
            try:
                process.reap()
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
        if errors:
            raise errors[0]


# -- in-process instances --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_instance(
    topology: Topology, config: Mapping[str, Any], timeout: float = 60.0, *, tasks: Iterable[TaskId] | None = None
) -> AsyncIterator[KafkaStreams]:
    """An instance in this event loop, yielded once RUNNING (with `tasks`, once RUNNING these active
    tasks: after a kill -9 the streams protocol gives them only when the broker's session timeout
    fenced the dead member, 10 s on the test broker), always closed at the end."""
    streams = KafkaStreams(topology, config)
    wanted = None if tasks is None else frozenset(tasks)
    try:
        await streams.start()
        deadline = time.monotonic() + timeout
        while True:
            await streams.wait_for_state(State.RUNNING, State.ERROR, timeout=max(deadline - time.monotonic(), 0.1))
            assert streams.state is State.RUNNING, f"instance failed: {streams.errors}"
            running = frozenset(t.task_id for thread in streams.metadata_for_local_threads() for t in thread.active_tasks)
            if wanted is None or (running == wanted and streams.state is State.RUNNING):
                break
            assert time.monotonic() < deadline, f"the instance runs {sorted(map(str, running))}, not {sorted(map(str, wanted))}"
            await asyncio.sleep(0.1)
        yield streams
    except BaseException:
        await streams.close(timeout=30)
        raise
    assert await streams.close(timeout=30), "the in-process instance did not close in time"


async def kill_in_open_transaction(process: AppProcess, bootstrap: str, topics: Sequence[str], timeout: float = 5.0) -> bool:
    """kill -9 `process` at a moment when one of `topics` has an open transaction holding records.

    Polls the high watermarks, then the last stable offsets: LSO < HW means a transaction wrote
    records and is not committed yet. Kills anyway after `timeout` seconds; returns whether
    the open transaction was seen just before the kill (it may still commit in between).
    """
    tps = [tp for topic in topics for tp in await topic_partitions(bootstrap, topic)]
    uncommitted = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    committed = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    await uncommitted.start()
    await committed.start()
    seen = False
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            high = await uncommitted.end_offsets(tps)
            stable = await committed.end_offsets(tps)
            if any(stable[tp] < high[tp] for tp in tps):
                seen = True
                break
    finally:
        process.kill()
        await uncommitted.stop()
        await committed.stop()
    return seen


# -- input -----------------------------------------------------------------------------------


class InputFeeder:
    """Produces `total` records over `keys` in chunks, in the background; `truth` counts them.

    Records are produced (acks=all) in chunks of `chunk` with `pause` seconds between chunks, so
    that instances can be killed while input is still arriving. A key's records all go to one
    partition (the default partitioner), so its count is owned by one task.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        keys: Sequence[str],
        total: int,
        *,
        chunk: int = 500,
        pause: float = 0.05,
        seed: int = 0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.keys = list(keys)
        self.total = total
        self.chunk = chunk
        self.pause = pause
        self.truth: Counter[str] = Counter()
        self.produced = 0
        self._random = random.Random(seed)
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            while self.produced < self.total:
                n = min(self.chunk, self.total - self.produced)
                futures = []
                for _ in range(n):
                    key = self._random.choice(self.keys)
                    futures.append(await producer.send(self.topic, key=key.encode(), value=b"x"))
                    self.truth[key] += 1
                await asyncio.gather(*futures)
                self.produced += n
                if self.pause:
                    await asyncio.sleep(self.pause)
        finally:
            await producer.stop()

    def start(self) -> InputFeeder:
        self._task = asyncio.create_task(self._run(), name="input-feeder")
        return self

    async def run(self) -> Counter[str]:
        """Produce everything now (in the foreground)."""
        self.start()
        return await self.wait()

    async def wait(self, timeout: float = 120.0) -> Counter[str]:
        assert self._task is not None
        await asyncio.wait_for(asyncio.shield(self._task), timeout)
        return self.truth

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# -- reading back ----------------------------------------------------------------------------


def decode_long(value: bytes | None) -> int | None:
    """Serdes.Long: 8-byte big-endian signed; None stays None (a tombstone)."""
    return None if value is None else struct.unpack(">q", value)[0]


def changelog_topic(app_id: str, store: str = STORE) -> str:
    return f"{app_id}-{store}-changelog"


def latest_by_key(records: Iterable[Consumed]) -> dict[str, int]:
    """The last value per key (records in offset order per partition; a key lives in one partition)."""
    latest: dict[str, int] = {}
    for record in records:
        assert record.key is not None
        value = decode_long(record.value)
        if value is None:
            latest.pop(record.key.decode(), None)
        else:
            latest[record.key.decode()] = value
    return latest


def sequences_by_key(records: Iterable[Consumed]) -> dict[str, list[int | None]]:
    """The values of each key in offset order (a key's records are all in one partition)."""
    sequences: dict[str, list[int | None]] = {}
    for record in records:
        assert record.key is not None
        sequences.setdefault(record.key.decode(), []).append(decode_long(record.value))
    return sequences


def not_one_to_n(sequences: Mapping[str, Sequence[int | None]], truth: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Keys whose values are not exactly 1, 2, ..., truth[key]: {key: (values seen, truth)}."""
    keys = set(sequences) | set(truth)
    return {
        key: (len(sequences.get(key, ())), truth.get(key, 0))
        for key in sorted(keys)
        if list(sequences.get(key, ())) != list(range(1, truth.get(key, 0) + 1))
    }


async def next_offsets_after_records(bootstrap: str, topic: str, isolation_level: str = "read_committed") -> dict[int, int]:
    """Partition -> offset after its last (visible) record: where a caught-up reader of the records stands.

    Differs from the end offset when the log ends with a transaction marker.
    """
    result = {tp.partition: 0 for tp in await topic_partitions(bootstrap, topic)}
    for record in await read_all(bootstrap, topic, isolation_level=isolation_level, timeout=30):
        result[record.partition] = max(result[record.partition], record.offset + 1)
    return result


async def read_latest(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted") -> dict[str, int]:
    return latest_by_key(await read_all(bootstrap, topic, isolation_level=isolation_level, timeout=30))


async def end_offsets(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted") -> dict[int, int]:
    """Partition -> end offset (the last stable offset under read_committed)."""
    tps = await topic_partitions(bootstrap, topic)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level, enable_auto_commit=False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in ends.items()}


async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Partition -> offset committed by consumer group `group` for `topic` (absent: none)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


async def wait_all_committed(bootstrap: str, group: str, topic: str, timeout: float = 60.0) -> dict[int, int]:
    """Wait until `group` committed the end offset of every partition of `topic` (all input processed)."""
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    committed: dict[int, int] = {}
    while time.monotonic() < deadline:
        ends = await end_offsets(bootstrap, topic)
        committed = await committed_offsets(bootstrap, group, topic)
        if all(committed.get(p, 0) >= end for p, end in ends.items()):
            return committed
        await asyncio.sleep(0.2)
    raise AssertionError(f"group {group} did not commit the end of {topic} in {timeout} s: {committed} < {ends}")


def checkpoints(state_dir: Path, app_id: str) -> dict[TaskId, dict[tuple[str, int], int]]:
    """Task -> its `.checkpoint` offsets, for every task directory of `app_id` under `state_dir`."""
    found: dict[TaskId, dict[tuple[str, int], int]] = {}
    root = state_dir / app_id
    for entry in sorted(root.iterdir()) if root.is_dir() else ():
        path = entry / CHECKPOINT_FILE_NAME
        if entry.is_dir() and path.exists():
            found[TaskId.parse(entry.name)] = OffsetCheckpoint(path).read()
    return found


def sqlite_store_contents(state_dir: Path, app_id: str, store: str = STORE) -> dict[str, int]:
    """Keys and values of `store` read straight from its SQLite files (of a stopped instance)."""
    contents: dict[str, int] = {}
    for path in sorted((state_dir / app_id).glob(f"*/{store}.sqlite")):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for key, value in connection.execute("SELECT key, value FROM key_value"):
                assert key.decode() not in contents, f"key {key!r} in two task directories"
                contents[key.decode()] = decode_long(value)  # type: ignore[assignment]
        finally:
            connection.close()
    return contents


def store_contents(streams: KafkaStreams, store: str = STORE) -> dict[str, int]:
    """Every key and value of `store` over the active tasks of an in-process instance."""
    contents: dict[str, int] = {}
    for thread in streams.threads:
        assert thread.task_manager is not None
        for task in thread.task_manager.tasks.values():
            kv_store: Any = task.state_manager.get_store(store)
            for key, value in kv_store.all():
                assert key not in contents, f"key {key!r} in two tasks"
                contents[key] = value
    return contents


def restored_by_task(streams: KafkaStreams) -> dict[TaskId, int]:
    """Records each active task of an in-process instance restored when it was created."""
    return {
        task_id: task.restored_records
        for thread in streams.threads
        if thread.task_manager is not None
        for task_id, task in thread.task_manager.tasks.items()
    }
