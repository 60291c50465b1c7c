"""Issue 15 at full size: damaged state restored exactly, and poison input under each policy.

    flock /tmp/bench.lock .venv/bin/python bench/chaos/faults.py --records 100000 --keys 10000
    .venv/bin/python bench/chaos/faults.py --records 10000 --keys 1000 --trials 50   (a quick run)

Starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on error).

State damage (tests/chaos/test_state_damage.py at size). The counting application
(tests/integration/apps/counting_app.py: a count per key in a logged SQLite store, 2 partitions)
counts `--records` records over `--keys` keys; its state directory is copied mid-stream (as a
kill -9 leaves it: WAL, the last commit's checkpoint, no digest) and after a clean close. Each
case copies a snapshot, damages both task directories the same way (tests/chaos/faults.py),
starts an instance on it and measures the time to RUNNING (restore included), the records
restored and the tasks wiped; then queries every key through the interactive-query API (wrong
answers), feeds 1% more input and queries again (counts going on). Then, on a copy of one clean
store file without its digest, `--trials` random overwrites of 1, 8 and 64 bytes at random places:
how many `PRAGMA quick_check` finds, how many are harmless, how many answer a row wrong (the
limit docs/state.md states), and what quick_check and the digest cost on that file.

Poison input (tests/chaos/test_poison_input.py at size). `--records` word-count lines as JSON,
`--poison` of them bad (undecodable key, undecodable value, malformed JSON, JSON of the wrong
shape, negative timestamp, in turn); the word count runs to the end of the input under
log_and_continue (both timestamp policies), dead_letter, and log_and_fail; per run: the words
missing or extra against the truth, and where the bad records went (dropped, dead-letter topic
with correct headers, counted with the partition time, or the error that stopped the run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams_core import (
    KafkaStreams,
    LogAndSkipOnInvalidTimestamp,
    QueryableStoreTypes,
    State,
    TaskId,
    UsePartitionTimeOnInvalidTimestamp,
)
from streams_core.broker import LocalKafkaBroker
from tests.chaos.faults import DAMAGES, POISON_KINDS, STALE_KEY, Input, json_word_count, produce_input
from tests.integration.apps.counting_app import STORE, build_topology, streams_config
from tests.integration.apps.harness import (
    InputFeeder,
    changelog_topic,
    end_offsets,
    read_latest,
    restored_by_task,
    wait_all_committed,
)
from tests.kafka_utils import create_topic, read_all, unique_topic

PARTITIONS = 2
FAST = {"commit.interval.ms": 100, "poll.ms": 50, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "linger.ms": 5}

CASES = [
    ("clean", "none"),
    ("clean", "state-dir-deleted"),
    ("clean", "sqlite-deleted"),
    ("clean", "sqlite-truncated-0"),
    ("clean", "sqlite-truncated-half"),
    ("clean", "sqlite-header-garbage"),
    ("clean", "sqlite-middle-garbage"),
    ("clean", "sqlite-one-bit-in-a-count"),
    ("clean", "checkpoint-garbage"),
    ("clean", "checkpoint-truncated"),
    ("clean", "checkpoint-wrong-version"),
    ("kill", "none"),
    ("kill", "checkpoint-deleted"),
    ("kill", "sqlite-truncated-0"),
    ("kill", "sqlite-deleted"),
    ("kill", "checkpoint-garbage"),
    ("kill", "checkpoint-past-the-end"),
]


class Damaged:
    """The counting application of the damage cases, its snapshots and its truth."""

    def __init__(self, bootstrap: str, root: Path, keys: int) -> None:
        self.bootstrap = bootstrap
        self.root = root
        self.keys = [f"word-{i:04d}" for i in range(keys)]
        self.app_id = unique_topic("faults")
        self.input = unique_topic("faults-in")
        self.output = unique_topic("faults-out")
        self.truth: Counter[str] = Counter()
        self.seed = 0

    def config(self, state_dir: Path) -> dict[str, Any]:
        return streams_config(self.bootstrap, self.app_id, state_dir)

    async def feed(self, total: int) -> None:
        self.seed += 1
        feeder = InputFeeder(self.bootstrap, self.input, self.keys, total, chunk=2000, pause=0, seed=self.seed)
        self.truth.update(await feeder.run())

    def wrong_answers(self, streams: KafkaStreams) -> int:
        store = streams.store(STORE, QueryableStoreTypes.key_value_store())
        wrong = sum(1 for k in self.keys if store.get(k) != (self.truth[k] or None))
        return wrong + (store.get(STALE_KEY) is not None)


async def damage_cases(broker: str, root: Path, records: int, keys: int) -> list[dict[str, Any]]:
    d = Damaged(broker, root, keys)
    await create_topic(broker, d.input, PARTITIONS)
    await create_topic(broker, d.output, PARTITIONS)
    live = root / "live"
    streams = KafkaStreams(build_topology(d.input, d.output), d.config(live))
    began = time.monotonic()
    await streams.start()
    await streams.wait_for_state(State.RUNNING, timeout=60)
    await d.feed(records)
    await wait_all_committed(broker, d.app_id, d.input, timeout=600)
    await d.feed(records // 100)
    shutil.copytree(live, root / "kill", ignore=shutil.ignore_patterns(".lock"))  # nothing awaited: a kill -9 now
    await wait_all_committed(broker, d.app_id, d.input, timeout=600)
    await streams.close(timeout=60)
    shutil.copytree(live, root / "clean", ignore=shutil.ignore_patterns(".lock"))
    print(f"counted {sum(d.truth.values())} records over {len(d.truth)} keys in {time.monotonic() - began:.1f} s", flush=True)

    rows = []
    for snapshot, name in CASES:
        case_dir = root / f"{snapshot}-{name}"
        shutil.copytree(root / snapshot, case_dir)
        rnd = random.Random(name)
        for p in range(PARTITIONS):
            task_dir = case_dir / d.app_id / str(TaskId(0, p))
            if name == "state-dir-deleted":
                shutil.rmtree(task_dir)
            else:
                DAMAGES[name].apply(task_dir, rnd)
        ends = await end_offsets(broker, changelog_topic(d.app_id))
        streams = KafkaStreams(build_topology(d.input, d.output), d.config(case_dir))
        started = time.monotonic()
        try:
            await streams.start()
            state = await streams.wait_for_state(State.RUNNING, State.ERROR, timeout=300)
            ready_s = time.monotonic() - started
            if state is not State.RUNNING:
                raise RuntimeError(f"{snapshot}/{name}: the instance failed: {streams.errors}")
            restored = sum(restored_by_task(streams).values())
            tm = streams.threads[0].task_manager
            wiped = 0 if tm is None else tm.corrupted_tasks
            wrong = d.wrong_answers(streams)
            await d.feed(max(1, records // 100))
            await wait_all_committed(broker, d.app_id, d.input, timeout=300)
            wrong_after = d.wrong_answers(streams)
        finally:
            await streams.close(timeout=60)
        shutil.rmtree(case_dir)
        row = {
            "snapshot": snapshot, "damage": name, "changelog": sum(ends.values()), "restored": restored,
            "wiped": wiped, "ready_s": ready_s, "wrong": wrong, "wrong_after": wrong_after,
        }
        rows.append(row)
        print(
            f"{snapshot:5s} {name:27s} restored {restored:7d}/{row['changelog']:7d}  tasks wiped {wiped}  "
            f"RUNNING after {ready_s:5.2f} s  wrong answers {wrong} (after more input: {wrong_after})",
            flush=True,
        )
    changelog = await read_latest(broker, changelog_topic(d.app_id))
    rows.append({"final_changelog_equals_truth": changelog == dict(d.truth)})
    return rows


def quick_check_limits(store_file: Path, trials: int, root: Path) -> list[dict[str, Any]]:
    """Random overwrites of a store file without its digest: found by quick_check, harmless, or wrong."""
    original = store_file.read_bytes()
    reference = _rows(store_file)
    work = root / "probe.sqlite"
    rnd = random.Random(15)
    results = []
    for size in (1, 8, 64):
        found = harmless = wrong = 0
        for _ in range(trials):
            data = bytearray(original)
            at = rnd.randrange(100, len(data) - size)
            data[at : at + size] = rnd.randbytes(size)
            work.write_bytes(bytes(data))
            try:
                connection = sqlite3.connect(work)
                try:
                    ok = connection.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
                finally:
                    connection.close()
                rows = _rows(work) if ok else None
            except Exception:
                ok, rows = False, None
            if not ok:
                found += 1
            elif rows == reference:
                harmless += 1
            else:
                wrong += 1
        results.append({"bytes": size, "trials": trials, "found": found, "harmless": harmless, "wrong": wrong})
    work.write_bytes(original)
    began = time.perf_counter()
    connection = sqlite3.connect(work)
    connection.execute("PRAGMA quick_check(1)").fetchone()
    connection.close()
    quick_check_ms = (time.perf_counter() - began) * 1000
    began = time.perf_counter()
    zlib.crc32(work.read_bytes())
    digest_ms = (time.perf_counter() - began) * 1000
    results.append({"file_bytes": len(original), "quick_check_ms": quick_check_ms, "digest_ms": digest_ms})
    return results


def _rows(path: Path) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT key, value FROM key_value ORDER BY key").fetchall()
    finally:
        connection.close()


async def poison_runs(broker: str, root: Path, records: int, share: float) -> list[dict[str, Any]]:
    data = await produce_input(broker, records, POISON_KINDS, share, seed=15, partitions=PARTITIONS)
    kinds = Counter(p.kind for p in data.bad.values())
    print(f"produced {records} records: {data.good} good, {len(data.bad)} bad {dict(kinds)}", flush=True)
    rows = []
    for handler, extractor in (
        ("log_and_continue", LogAndSkipOnInvalidTimestamp),
        ("log_and_continue", UsePartitionTimeOnInvalidTimestamp),
        ("dead_letter", LogAndSkipOnInvalidTimestamp),
        ("log_and_fail", None),
    ):
        rows.append(await _poison_run(broker, root, data, handler, extractor))
        print(json.dumps(rows[-1]), flush=True)
    return rows


async def _poison_run(broker: str, root: Path, data: Input, handler: str, extractor: Any) -> dict[str, Any]:
    app_id = unique_topic(f"poison-{handler}")
    output = unique_topic("poison-out")
    dlq = unique_topic("poison-dlq")
    await create_topic(broker, output, PARTITIONS)
    await create_topic(broker, dlq, 1)
    cfg: dict[str, Any] = {
        "application.id": app_id, "bootstrap.servers": broker, "state.dir": str(root / app_id),
        "default.deserialization.exception.handler": handler, "errors.dead.letter.queue.topic.name": dlq, **FAST,
    }
    if extractor is not None:
        cfg["default.timestamp.extractor"] = extractor
    truth = Counter(data.truth)
    with_partition_time = [p for p in data.bad.values() if p.kind == "negative-timestamp"]
    if extractor is UsePartitionTimeOnInvalidTimestamp:
        for poison in with_partition_time:
            truth.update(json.loads(poison.value)["text"].split())
    streams = KafkaStreams(json_word_count(data.topic, output), cfg)
    began = time.monotonic()
    row: dict[str, Any] = {"handler": handler, "extractor": getattr(extractor, "__name__", "FailOnInvalidTimestamp")}
    try:
        await streams.start()
        if handler == "log_and_fail":
            state = await streams.wait_for_state(State.ERROR, State.NOT_RUNNING, timeout=300)
            message = str(streams.errors[0]) if streams.errors else ""
            first = data.first_bad()
            row["failed"] = state is State.ERROR
            row["names_first_bad_record"] = any(
                f"topic={data.topic}" in message and f"partition={p}" in message and f"offset={o}" in message
                for p, o in first.items()
            )
            row["error"] = message[:160]
            row["seconds"] = round(time.monotonic() - began, 2)
            return row
        await streams.wait_for_state(State.RUNNING, timeout=120)
        await wait_all_committed(broker, app_id, data.topic, timeout=600)
        store = streams.store("word-count", QueryableStoreTypes.key_value_store())
        deadline = time.monotonic() + 120
        while dict(store.all()) != dict(truth) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        counts = dict(store.all())
        row["seconds"] = round(time.monotonic() - began, 2)
        (metrics,) = streams.metrics()["threads"]
    finally:
        await streams.close(timeout=60)
    row["words_missing"] = sum(max(0, n - counts.get(w, 0)) for w, n in truth.items())
    row["words_extra"] = sum(max(0, n - truth.get(w, 0)) for w, n in counts.items())
    row["dropped_records"] = metrics["dropped_records"]
    row["dead_lettered_records"] = metrics["dead_lettered_records"]
    if handler == "dead_letter":
        expected = {at: p for at, p in data.bad.items() if p.deserializable}
        found = {}
        for record in await read_all(broker, dlq, timeout=60):
            headers = dict(record.headers)
            at = (int(headers["__streams.errors.partition"]), int(headers["__streams.errors.offset"]))
            ok = headers["__streams.errors.topic"] == data.topic.encode() and at in expected
            found[at] = ok and (record.key, record.value) == (expected[at].key, expected[at].value)
        row["dlq_records"] = len(found)
        row["dlq_with_right_origin_and_bytes"] = sum(found.values())
        row["dlq_expected"] = len(expected)
    if extractor is UsePartitionTimeOnInvalidTimestamp:
        row["counted_with_partition_time"] = len(with_partition_time)
    return row


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("streams_core", "aiokafka"):  # log_and_fail's stop is reported in the figures
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    print(f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {platform.machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        root = Path(tmp)
        with LocalKafkaBroker(root / "broker", port=0) as broker:
            results: dict[str, Any] = {"args": vars(args)}
            if not args.skip_damage:
                results["damage"] = await damage_cases(broker.bootstrap_servers, root / "damage", args.records, args.keys)
                store_file = next((root / "damage" / "clean").rglob("counts.sqlite"))
                results["quick_check"] = quick_check_limits(store_file, args.trials, root)
                for row in results["quick_check"]:
                    print(json.dumps(row), flush=True)
            if not args.skip_poison:
                results["poison"] = await poison_runs(broker.bootstrap_servers, root / "poison", args.records, args.poison)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="input records of each part (default 100000)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys of the counting app (default 10000)")
    parser.add_argument("--poison", type=float, default=0.01, help="share of bad records (default 0.01)")
    parser.add_argument("--trials", type=int, default=300, help="random overwrites per size for the quick_check probe")
    parser.add_argument("--skip-damage", action="store_true")
    parser.add_argument("--skip-poison", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
