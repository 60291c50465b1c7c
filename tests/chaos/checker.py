"""The chaos checker: the word counts in the output topic and in the stores, against the truth.

`OutputChecker` reads the output topic read_committed from the beginning, incrementally (a
full-size run writes millions of updates; nothing but a few numbers per key is kept), and folds
every update of a word of the truth:

- exactly-once, caching off: a word's committed updates must be exactly 1, 2, ..., N. An update
  that is not its predecessor + 1 is a duplicate (a value seen again: a replay that reached the
  committed output) or a gap (an update lost); the final value must equal N.
- at-least-once: the final value must not be below N (replays may count a line twice).

`check_stores` asks every word over HTTP (`/state/keyvalue/word-count/{word}`, each from a random
live instance, so most answers are forwarded) until the stores agree with the truth.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import httpx
from aiokafka import AIOKafkaConsumer

from app.wordcount import OUTPUT_TOPIC, STORE
from tests.integration.rest_cluster import Instance, quoted
from tests.kafka_utils import topic_partitions

if TYPE_CHECKING:
    from tests.chaos.harness import ChaosReport

__all__ = ["OutputChecker", "check_stores"]


class OutputChecker:
    """Folds the committed word-count updates of the truth's words; see the module doc."""

    def __init__(self, bootstrap: str, truth: Mapping[str, int], *, exact: bool) -> None:
        self.truth = truth
        self.exact = exact
        self.last: dict[str, int] = {}
        self.updates = 0
        self.duplicates = 0
        self.gaps = 0
        self.samples: list[str] = []
        self._bootstrap = bootstrap
        self._consumer: AIOKafkaConsumer | None = None

    async def _start(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap, enable_auto_commit=False, isolation_level="read_committed",
                auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
            )  # fmt: skip
            await consumer.start()
            self._consumer = consumer
            partitions = await topic_partitions(self._bootstrap, OUTPUT_TOPIC)
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
        return self._consumer

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def catch_up(self) -> None:
        """Fold everything committed up to the output's current last stable offsets."""
        consumer = await self._start()
        partitions = list(consumer.assignment())
        ends = await consumer.end_offsets(partitions)  # read_committed: the last stable offsets
        while True:
            behind = [tp for tp in partitions if await consumer.position(tp) < ends[tp]]
            if not behind:
                return
            batch = await consumer.getmany(*behind, timeout_ms=500, max_records=50_000)
            for records in batch.values():
                for record in records:
                    self._fold(record.key, record.value)

    def _fold(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:
            return
        word = key.decode("utf-8", errors="replace")
        if word not in self.truth:
            return
        count = int.from_bytes(value, "big", signed=True)
        previous = self.last.get(word, 0)
        self.updates += 1
        if count != previous + 1:
            if count <= previous:
                self.duplicates += 1
            else:
                self.gaps += 1
            if len(self.samples) < 5:
                self.samples.append(f"{word!r}: {previous} then {count}")
        self.last[word] = count

    def below(self) -> dict[str, tuple[int, int]]:
        return {w: (self.last.get(w, 0), n) for w, n in self.truth.items() if self.last.get(w, 0) < n}

    def above(self) -> dict[str, tuple[int, int]]:
        return {w: (self.last.get(w, 0), n) for w, n in self.truth.items() if self.last.get(w, 0) > n}

    async def settle(self, timeout: float) -> None:
        """Read until every word reached the truth (exactly-once: and none went past it), or `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            await self.catch_up()
            if not self.below() or (self.exact and self.above()) or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)

    def into(self, report: ChaosReport) -> None:
        """Count the findings into the report; each kind of wrong result is a problem."""
        below, above = self.below(), self.above()
        report.output_records += self.updates
        report.below_truth += len(below)
        report.wrong_counts += len(below) + (len(above) if self.exact else 0)
        extra = self.updates - sum(self.truth.values())
        report.duplicates += max(extra, self.duplicates) if not self.exact else self.duplicates
        if below:
            report.fail(f"{len(below)} words below the truth in the output (last, truth): {_some(below)}")
        if self.exact:
            if above:
                report.fail(f"{len(above)} words above the truth in the committed output (last, truth): {_some(above)}")
            if self.duplicates or self.gaps:
                report.fail(
                    f"committed output not 1, 2, ..., N: {self.duplicates} repeated and {self.gaps} skipped "
                    f"updates, e.g. {self.samples}"
                )


def _some(found: Mapping[str, tuple[int, int]], n: int = 5) -> str:
    return ", ".join(f"{w!r} {v}" for w, v in sorted(found.items())[:n]) + (" ..." if len(found) > n else "")


async def check_stores(
    instances: Sequence[Instance], truth: Mapping[str, int], report: ChaosReport, *, exact: bool, timeout: float
) -> None:
    """Ask every word from a random instance until the answers agree with the truth (or `timeout`)."""
    rnd = random.Random(report.seed)
    pending = dict(truth)
    wrong: dict[str, int | None] = {}
    deadline = time.monotonic() + timeout
    limit = asyncio.Semaphore(16)
    async with httpx.AsyncClient(timeout=10) as http:

        async def ask(word: str, instance: Instance) -> tuple[str, int | None]:
            async with limit:
                try:
                    response = await http.get(f"{instance.url}/state/keyvalue/{STORE}/{quoted(word)}")
                except httpx.HTTPError:
                    return word, None
            if response.status_code == 404:
                return word, 0
            if response.status_code != 200:
                return word, None  # 503 while a store is not queryable: ask again
            return word, int(response.json()["value"])

        while pending:
            answers = await asyncio.gather(*(ask(w, rnd.choice(instances)) for w in sorted(pending)))
            wrong = {w: v for w, v in answers if v is None or (v != truth[w] if exact else v < truth[w])}
            pending = {w: truth[w] for w in wrong}
            if not pending or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    report.store_wrong += len(wrong)
    if wrong:
        sample = ", ".join(f"{w!r}: {v} (truth {truth[w]})" for w, v in sorted(wrong.items())[:5])
        report.fail(f"{len(wrong)} words answered wrong (or not at all) over HTTP: {sample}")
