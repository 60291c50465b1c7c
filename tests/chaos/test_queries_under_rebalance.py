"""Interactive queries through joins, leaves and kills while input keeps coming (issue 15).

An exactly-once word count: processes (`python -m app wordcount`, so that they can be killed
with SIGKILL) and in-process instances. A producer writes lines of this test's own words the
whole time, except at *quiet points*: between rebalances it pauses until the group has committed
every input and repartition record, so the counts at that moment (the producer's truth) are
durable. Pollers ask every word through every live instance all along. Every answer must be:

- a 200 whose count lies between the truth of the last quiet point before the query was sent
  (exactly-once: committed counts never go back) and what the producer had written when the
  answer came (never a count of input that does not exist); or
- a 503 with `Retry-After` (a store not queryable right now).

At each quiet point a sweep through every live instance must answer every word with its exact
count. The share of 503s and the longest run of them are printed. `CHAOS_SEED` reproduces a run;
`CHAOS_REBALANCES=10` (default 4: a join, a kill, a restart, a leave) is the full-size run.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE
from tests.integration.rest_cluster import (
    FAST_CONFIG,
    Client,
    Instance,
    InstanceTasks,
    WordCountCluster,
    make_text,
    quoted,
    wait_until,
)
from tests.kafka_utils import Rec, create_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.chaos, pytest.mark.slow]

PARTITIONS = 4
EXACTLY_ONCE = {"processing.guarantee": "exactly_once_v2"}
PROCESS_ENV = {  # the CLI's instances: every property is STREAMS_<NAME>
    "STREAMS_PROCESSING_GUARANTEE": "exactly_once_v2",
    "STREAMS_SESSION_TIMEOUT_MS": "6000",
    "STREAMS_HEARTBEAT_INTERVAL_MS": "500",
}


@dataclass(frozen=True, slots=True)
class Answer:
    sent: float
    received: float
    through: str
    word: str
    status: int
    value: int | None
    retry_after: str | None


@dataclass
class Truth:
    """What the producer wrote (counted before each send) and the counts of each quiet point."""

    written: Counter[str] = field(default_factory=Counter)
    quiet: list[tuple[float, Counter[str]]] = field(default_factory=list)

    def floor(self, at: float) -> Counter[str]:
        """The durable counts of the last quiet point before `at`."""
        found: Counter[str] = Counter()
        for when, counts in self.quiet:
            if when <= at:
                found = counts
        return found


class Pollers:
    """One task per live instance asking every word, round after round."""

    def __init__(self, client: Client, words: list[str], truth: Truth) -> None:
        self.client, self.words, self.truth = client, words, truth
        self.answers: list[Answer] = []
        self.tasks = InstanceTasks()

    def add(self, instance: Instance) -> None:
        self.tasks.start(instance.name, self._poll(instance))

    async def _poll(self, instance: Instance) -> None:
        while True:
            for word in self.words:
                sent = time.monotonic()
                answer = await self.client.get(instance.url, f"/state/keyvalue/{STORE}/{quoted(word)}")
                body = answer.body if isinstance(answer.body, dict) else {}
                value = body.get("value") if answer.status == 200 else None
                self.answers.append(
                    Answer(sent, time.monotonic(), instance.name, word, answer.status, value, answer.retry_after)
                )

    def longest_unavailable(self) -> float:
        """The longest time one key through one instance got nothing but 503s (from the first to the next 200)."""
        longest = 0.0
        since: dict[tuple[str, str], float] = {}
        for a in self.answers:
            if a.status == 503:
                since.setdefault((a.through, a.word), a.sent)
            elif (began := since.pop((a.through, a.word), None)) is not None:
                longest = max(longest, a.received - began)
        return longest

    def wrong(self, written_at: list[tuple[float, Counter[str]]]) -> list[str]:
        """Answers outside [floor when sent, written when received], and any status but 200 or 503 + Retry-After."""
        found = []
        for a in self.answers:
            if a.status == 503 and a.retry_after:
                continue
            floor = self.truth.floor(a.sent)[a.word]
            ceiling = next((c[a.word] for when, c in written_at if when >= a.received), self.truth.written[a.word])
            if a.status != 200 or a.value is None or not floor <= a.value <= ceiling:
                found.append(f"{a.through} {a.word}: {a.status} {a.value} (floor {floor}, ceiling {ceiling})")
        return found


def rebalance_plan(rnd: random.Random, count: int) -> list[tuple[str, str]]:
    """A join, a kill, a restart and a leave, then random ones: at most 4 live, at least 1 live process.

    `pN` are processes (the only ones that can be killed and restarted), `aN` in-process instances;
    the run starts with p1 and a1.
    """
    steps: list[tuple[str, str]] = [("join", "a2"), ("kill", "p1"), ("restart", "p1"), ("leave", "a2")]
    live, dead, started = {"p1", "a1"}, set[str](), {"p": 1, "a": 2}
    while len(steps) < count:
        processes = sorted(n for n in live if n.startswith("p"))
        options = ["join"] * (len(live) < 4) + ["restart"] * bool(dead) + ["leave", "kill"] * (len(processes) > 1)
        options += ["leave"] * (len(live) > 1 and any(n.startswith("a") for n in live))
        action = rnd.choice(options)
        if action == "join":
            kind = rnd.choice("pa")
            started[kind] += 1
            name = f"{kind}{started[kind]}"
            live.add(name)
        elif action == "restart":
            name = rnd.choice(sorted(dead))
            dead.discard(name)
            live.add(name)
        else:
            name = rnd.choice(processes if action == "kill" else sorted(n for n in live if n.startswith("a") or len(processes) > 1))
            live.discard(name)
            if action == "kill":
                dead.add(name)
        steps.append((action, name))
    return steps[:count]


async def committed_to_the_end(bootstrap: str, group: str, topics: list[str]) -> bool:
    """Whether the group's committed offsets reached the end of every partition of `topics`."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await admin.start()
    await consumer.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(partitions)
        return all(tp in committed and committed[tp].offset >= ends[tp] for tp in partitions)
    finally:
        await consumer.stop()
        await admin.close()


async def test_answers_stay_between_the_durable_and_the_written_count_through_rebalances(
    bootstrap_servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(1_000_000)))
    rnd = random.Random(seed)
    tag = uuid.uuid4().hex[:8]
    for name, value in PROCESS_ENV.items():
        monkeypatch.setenv(name, value)
    await create_topic(bootstrap_servers, INPUT_TOPIC, PARTITIONS)
    await create_topic(bootstrap_servers, OUTPUT_TOPIC, PARTITIONS)
    lines, _ = make_text(rnd, words=24, lines=4000, suffix=f"-{tag}", unicode=False)
    words = sorted({w for line in lines for w in line.lower().split()})
    app_id = f"chaos-queries-{tag}"
    cluster = WordCountCluster(bootstrap_servers, tmp_path, app_id, config={**FAST_CONFIG, **EXACTLY_ONCE})
    topics = [INPUT_TOPIC, f"{app_id}-{STORE}-repartition"]
    truth = Truth()
    written_at: list[tuple[float, Counter[str]]] = []
    client = Client()
    pollers = Pollers(client, words, truth)
    cursor = 0

    async def write(count: int) -> None:
        nonlocal cursor
        batch = lines[cursor : cursor + count]
        cursor += count
        truth.written.update(w for line in batch for w in line.lower().split())
        await produce(bootstrap_servers, INPUT_TOPIC, [Rec(f"{tag}-{cursor}-{n}".encode(), line.encode()) for n, line in enumerate(batch)])
        written_at.append((time.monotonic(), Counter(truth.written)))

    async def keep_writing(stop: asyncio.Event) -> None:
        """Writes until `stop` is set; never cancelled mid-batch (the truth counts a batch before it is sent)."""
        while not stop.is_set():
            await write(20)
            await asyncio.sleep(0.05)

    async def quiet_point(what: str) -> None:
        """No input in flight, everything committed; then every live instance answers exactly."""
        await cluster.wait_running(timeout=90)
        await wait_until(lambda: committed_to_the_end(bootstrap_servers, app_id, topics), 60, f"{what}: committed to the end")
        truth.quiet.append((time.monotonic(), Counter(truth.written)))

        mismatch: list[str] = []

        async def exact() -> bool:
            for instance in cluster.live():
                for word in words:
                    answer = await client.get(instance.url, f"/state/keyvalue/{STORE}/{quoted(word)}")
                    if answer.status != 200 or answer.body.get("value") != truth.written[word]:
                        mismatch[:] = [f"{instance.name} {word}: {answer.status} {answer.body} (truth {truth.written[word]})"]
                        return False
            return True

        await wait_until(exact, 30, lambda: f"{what}: every word exact through every instance (seed {seed}); last: {mismatch}")

    steps = rebalance_plan(rnd, int(os.environ.get("CHAOS_REBALANCES", "4")))
    report: list[str] = []
    writer: asyncio.Task[None] | None = None
    try:
        p1 = await cluster.start_process("p1")
        (a1,) = await cluster.start_in_process("a1")
        await write(400)
        await quiet_point("start")
        for instance in (p1, a1):
            pollers.add(instance)
        for action, name in steps:
            began = time.monotonic()
            stop_writing = asyncio.Event()
            writer = asyncio.get_running_loop().create_task(keep_writing(stop_writing))
            await asyncio.sleep(rnd.uniform(0.5, 2.0))
            if action == "join" and name.startswith("a"):
                (joined,) = await cluster.start_in_process(name)
                pollers.add(joined)
            elif action in ("join", "restart"):
                pollers.add(await cluster.start_process(name))
            else:
                await pollers.tasks.drop(name)
                if action == "kill":
                    cluster.kill(name)
                else:
                    await cluster.stop(name)
            await asyncio.sleep(rnd.uniform(1.0, 3.0))
            stop_writing.set()
            await writer
            await quiet_point(f"after {action} {name}")
            during = [a for a in pollers.answers if a.sent >= began]
            report.append(f"{action} {name}: {time.monotonic() - began:.1f} s, {len(during)} answers, "
                          f"{sum(a.status == 503 for a in during)} 503s")
        await pollers.tasks.stop()
    finally:
        if writer is not None and not writer.done():
            writer.cancel()
        await pollers.tasks.stop()
        await asyncio.gather(client.aclose(), cluster.close())

    answers = pollers.answers
    share = sum(a.status == 503 for a in answers) / max(1, len(answers))
    print(f"seed {seed}: {len(answers)} answers through {len(steps)} rebalances, 503 share {share:.1%}, "
          f"longest run of 503s for one key through one instance {pollers.longest_unavailable():.1f} s\n" + "\n".join(report))
    wrong = pollers.wrong(written_at)
    assert not wrong, f"seed {seed}: {len(wrong)} wrong answers, first: {wrong[:10]}"
    assert sum(a.status == 200 for a in answers) > len(words), f"seed {seed}: the pollers got answers"
