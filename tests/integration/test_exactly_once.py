"""Exactly-once under crashes (issue 5): kill -9 a counting application several times mid-stream.

The counting app forwards `(key, count)` after each increment, so under exactly-once the output
read with read_committed holds, for every key, exactly the sequence 1, 2, ..., n where n is how
many input records the key got: a repeat would be a record processed twice (a lost transaction
abort or a state/offset mismatch), a gap a lost update. Instances are real processes killed with
SIGKILL while input is still being produced: the first kill at a random moment, the next ones
at a random moment too but only once a transaction holds records on the broker (so that there is
something to abort). Each restart finds no checkpoint and restores the committed changelog past
the offsets the store file holds (docs/state.md, "Exactly-once without wipes").
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from streams_core import TaskId
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
    checkpoints,
    kill_in_open_transaction,
    next_offsets_after_records,
    not_one_to_n,
    read_latest,
    sequences_by_key,
    sqlite_store_contents,
    wait_all_committed,
)
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 3
KEYS = [f"key-{i:03d}" for i in range(60)]
KILLS = 3
COMMIT_EVERY_500_MS = ("--commit-interval-ms", "500")


@pytest.mark.slow
async def test_kill_9_three_times_under_exactly_once_gives_exact_counts_and_no_duplicates(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("eos-count"), unique_topic("eos-in"), unique_topic("eos-out")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    print(f"\nexactly-once kill test: random seed {seed}")
    rng.seed(seed)
    # A steady ~400 records/s for ~35 s: input keeps arriving across every kill and restart.
    feeder = InputFeeder(bootstrap, source, KEYS, 14_000, chunk=40, pause=0.09, seed=seed)
    changelog = changelog_topic(app_id)
    kills: list[str] = []
    try:
        with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
            feeder.start()
            for number in range(KILLS):
                app = procs.start("a", "exactly_once", *COMMIT_EVERY_500_MS)
                await app.wait_running(timeout=90)
                await asyncio.sleep(rng.uniform(0.3, 2.0))
                assert not feeder.done, "input finished before the last kill: make the feeder slower"
                produced = feeder.produced
                if number == 0:
                    app.kill()  # anywhere
                    kills.append(f"at random after {produced} inputs")
                else:
                    # The runtime hands a task's records to its producer at commit, so a
                    # transaction holds records on the broker only while it commits: aim there.
                    in_txn = await kill_in_open_transaction(app, bootstrap, [sink, changelog])
                    kills.append(f"{'in' if in_txn else 'no'} open transaction after {produced} inputs")
            last = procs.start("a", "exactly_once", *COMMIT_EVERY_500_MS)
            await last.wait_running(timeout=90)
            truth = await feeder.wait()
            await wait_all_committed(bootstrap, app_id, source, timeout=90)
            assert await last.terminate() == 0, last.log_tail()
    finally:
        await feeder.aclose()

    committed = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    uncommitted = await read_all(bootstrap, sink, isolation_level="read_uncommitted", timeout=30)
    sequences = sequences_by_key(committed)
    wrong = not_one_to_n(sequences, truth)
    assert not wrong, f"keys whose committed outputs are not exactly 1..n: (outputs, n) = {wrong}"
    assert set(sequences) == set(truth)
    assert len(committed) == sum(truth.values())

    assert await read_latest(bootstrap, changelog, "read_committed") == dict(truth)
    assert sqlite_store_contents(tmp_path / "a", app_id) == dict(truth)

    # The final clean close wrote checkpoints (exactly-once checkpoints only then): the offset
    # after each changelog partition's last record (its end is one further: the commit marker).
    after = await next_offsets_after_records(bootstrap, changelog)
    assert checkpoints(tmp_path / "a", app_id) == {
        TaskId(0, p): {(changelog, p): after[p]} for p in range(PARTITIONS)
    }

    print(
        f"exactly-once kill test: {sum(truth.values())} records, kills: {kills}, "
        f"{len(uncommitted) - len(committed)} output records aborted or pending at the kills"
    )
