"""The REST layer over a real cluster: 2 and 3 word-count instances on the real broker (issue 7).

Each instance runs in this event loop with its REST server on its own 127.0.0.1 port; the test
asks them over loopback HTTP. Once the text is counted, every instance must give the same
answer to every route for every key, and that answer must be right:

- `/state/keyvalue/word-count/{w}` is the independent count of the produced text, served by
  (`X-Served-By`) the instance that `/state/instance/word-count/{w}` names;
- that instance is the one whose `scope=local` part holds the word, and the partition it names
  is murmur2(UTF-8 word) mod the partition count of the store's source topic (the repartition
  topic `<app id>-word-count-repartition`, as many partitions as the input topic);
- `all` and `range` through any instance are the union of the local parts, in key order;
- the windowed store answers the counts of two one-minute windows, from the owner discovery names;
- an absent word is 404 everywhere, discovery answers are the same everywhere.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.wordcount import STORE, WINDOWED_STORE
from streams_core import State
from streams_core.common.partitioner import default_partition
from tests.integration.rest_cluster import FAST_CONFIG, Client, WordCountCluster, make_text, quoted, wait_until
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
WINDOW_MS = 60_000


async def _local_parts(client: Client, cluster: WordCountCluster, path: str) -> dict[str, list[dict[str, Any]]]:
    return {i.server: await client.ok(i.url, path + "?scope=local") for i in cluster.live()}


def _in_key_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: e["key"].encode("utf-8"))


async def _start_cluster(
    bootstrap_servers: str,
    tmp_path: Path,
    suffix: str,
    n_instances: int,
    input_topic: str,
    output_topic: str,
    extra: dict[str, Any] | None = None,
) -> WordCountCluster:
    """n running instances, preferably all hosting part of the word-count store.

    Started together they usually join in one generation and the store is spread; when one
    joins a generation late, the sticky assignor keeps all word-count tasks on the earlier
    ones (it gives the late one stateless and windowed tasks). Then this starts over under a
    new application id (nothing is produced yet), at most three times, and otherwise goes on
    with the store on fewer instances: every check still holds, some are just weaker.
    """
    for attempt in range(3):
        cluster = WordCountCluster(
            bootstrap_servers, tmp_path / f"attempt-{attempt}", f"rest-{suffix}-{attempt}",
            input_topic=input_topic, output_topic=output_topic, window_ms=WINDOW_MS,
            config={**FAST_CONFIG, **(extra or {})},
        )  # fmt: skip
        try:
            await cluster.start_in_process(*(f"i{i}" for i in range(n_instances)))
            await cluster.wait_running()
            client = Client()
            try:
                hosting = await client.ok(cluster.live()[0].url, "/state/instances")
            finally:
                await client.aclose()
        except BaseException:
            await cluster.close()
            raise
        if all(STORE in m["storeNames"] for m in hosting) or attempt == 2:
            print(f"word-count hosted by {sum(STORE in m['storeNames'] for m in hosting)} of {n_instances} instances")
            return cluster
        await cluster.close()
    raise AssertionError("unreachable")


async def _same_everywhere(client: Client, cluster: WordCountCluster, path: str) -> Any:
    """The one 200 answer every live instance gives to `path`."""
    answers = [await client.ok(i.url, path) for i in cluster.live()]
    for instance, answer in zip(cluster.live(), answers, strict=True):
        assert answer == answers[0], f"{path}: {instance.server} answers differently from {cluster.live()[0].server}"
    return answers[0]


WORKERS = {"num.stream.threads": 2, "stream.threads.mode": "process"}
"""Each instance's two stream threads in worker processes: the REST server reads their stores."""


STREAMS_GROUP = {"group.protocol": "streams"}
"""KIP-1071: the broker assigns, discovery follows its endpoint map (docs/streams-groups.md)."""


@pytest.mark.parametrize(
    ("n_instances", "extra"),
    [(2, None), (3, None), (2, WORKERS), (2, STREAMS_GROUP)],
    ids=["2", "3", "2x2-workers", "2-streams-group"],
)
async def test_every_instance_answers_every_route_for_every_key(
    bootstrap_servers: str, tmp_path: Path, n_instances: int, extra: dict[str, Any] | None
) -> None:
    suffix = unique_topic("rest")
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, PARTITIONS)
    await create_topic(bootstrap_servers, output_topic, PARTITIONS)
    rnd = random.Random(n_instances)
    first_window = (int(time.time() * 1000) // WINDOW_MS - 3) * WINDOW_MS
    second_window = first_window + WINDOW_MS
    lines_1, truth_1 = make_text(rnd, words=80, lines=150)
    lines_2, truth_2 = make_text(rnd, words=40, lines=60)
    truth = truth_1 + truth_2

    cluster = await _start_cluster(bootstrap_servers, tmp_path, suffix, n_instances, input_topic, output_topic, extra)
    client = Client()
    try:
        first = cluster.live()[0]

        async def counted(expected: Counter[str]) -> bool:
            answer = await client.get(first.url, f"/state/keyvalues/{STORE}/all")
            return answer.status == 200 and {e["key"]: e["value"] for e in answer.body} == dict(expected)

        # Two batches in two windows; the second is produced once the first is counted, so no
        # record of the first window comes after stream time has left it (no grace).
        await produce(bootstrap_servers, input_topic, [
            Rec(f"a{n}".encode(), line.encode(), timestamp_ms=first_window + 1000 + n) for n, line in enumerate(lines_1)
        ])  # fmt: skip
        await wait_until(lambda: counted(truth_1), 60, "the first batch counted")
        await produce(bootstrap_servers, input_topic, [
            Rec(f"b{n}".encode(), line.encode(), timestamp_ms=second_window + 1000 + n) for n, line in enumerate(lines_2)
        ])  # fmt: skip
        await wait_until(lambda: counted(truth), 60, "both batches counted")
        await cluster.wait_running()
        assert all(i.streams is not None and i.streams.state is State.RUNNING for i in cluster.live())
        servers = sorted(i.server for i in cluster.live())

        # Discovery: the same members everywhere, each with active tasks and no standby.
        members = await _same_everywhere(client, cluster, "/state/instances")
        assert sorted(f"{m['host']}:{m['port']}" for m in members) == servers
        assert all(m["standbyStoreNames"] == [] for m in members)
        repartition = f"{cluster.application_id}-{STORE}-repartition"
        for topic in (input_topic, repartition):
            owned = sorted(tp["partition"] for m in members for tp in m["topicPartitions"] if tp["topic"] == topic)
            assert owned == list(range(PARTITIONS)), f"{topic}: every partition has exactly one owner"
        hosting = [m for m in members if STORE in m["storeNames"]]
        assert await _same_everywhere(client, cluster, f"/state/instances/{STORE}") == hosting

        # The local parts: disjoint, together the whole count.
        local = await _local_parts(client, cluster, f"/state/keyvalues/{STORE}/all")
        holder: dict[str, str] = {}
        for server, part in local.items():
            assert part == _in_key_order(part), f"{server}'s local part is in key order"
            for entry in part:
                assert entry["key"] not in holder, f"{entry['key']!r} is on {holder.get(entry['key'])} and {server}"
                holder[entry["key"]] = server
        assert set(holder) == set(truth)
        assert {server for server, part in local.items() if part} == {
            f"{m['host']}:{m['port']}" for m in hosting
        }, "the instances with words are those hosting the store"

        # Every key, through every instance.
        for word, count in sorted(truth.items()):
            owner = await _same_everywhere(client, cluster, f"/state/instance/{STORE}/{quoted(word)}")
            assert f"{owner['host']}:{owner['port']}" == holder[word], f"owner of {word!r}"
            assert owner["partition"] == default_partition(word.encode("utf-8"), PARTITIONS), f"partition of {word!r}"
            assert owner["standbyHosts"] == [] and STORE in owner["storeNames"]
            for instance in cluster.live():
                answer = await client.get(instance.url, f"/state/keyvalue/{STORE}/{quoted(word)}")
                assert (answer.status, answer.body) == (200, {"key": word, "value": count}), (instance.server, word)
                assert answer.served_by == holder[word], f"{word!r} through {instance.server} served by the owner"
        for instance in cluster.live():
            absent = await client.get(instance.url, f"/state/keyvalue/{STORE}/{quoted('absent-' + suffix)}")
            assert absent.status == 404 and absent.body["error"] == "key not found"

        # all: the union of the local parts, in key order, everywhere.
        union = _in_key_order([entry for part in local.values() for entry in part])
        assert union == _in_key_order([{"key": w, "value": c} for w, c in truth.items()])
        assert await _same_everywhere(client, cluster, f"/state/keyvalues/{STORE}/all") == union
        for instance in cluster.live():  # gathered from every instance hosting the store, which X-Served-By names
            gathered = await client.get(instance.url, f"/state/keyvalues/{STORE}/all")
            assert set((gathered.served_by or "").split(", ")) == {f"{m['host']}:{m['port']}" for m in hosting}

        # range: inclusive bounds that are words, bounds that are not, a range past the end.
        keys = [e["key"] for e in union]
        ranges = [(keys[5], keys[40]), ("b", "m"), ("m", "\uffff"), (keys[10], keys[10]), ("zzzz", "zzzzz")]
        for lower, upper in ranges:
            path = f"/state/keyvalues/{STORE}/range/{quoted(lower)}/{quoted(upper)}"
            expected = [e for e in union if lower.encode() <= e["key"].encode() <= upper.encode()]
            if (lower, upper) == ranges[0]:
                assert len(expected) == 36
            local_range = await _local_parts(client, cluster, path)
            assert _in_key_order([e for part in local_range.values() for e in part]) == expected
            assert await _same_everywhere(client, cluster, path) == expected, f"range {lower!r}..{upper!r}"

        # windowed: both windows of words of both batches, the first window only, none; served by the
        # owner the discovery names (partition: murmur2 mod the windowed store's repartition topic's).
        both = sorted(set(truth_1) & set(truth_2))[:4]
        only_first = sorted(set(truth_1) - set(truth_2))[:2]
        assert both and only_first
        for word in both + only_first:
            owner = await _same_everywhere(client, cluster, f"/state/instance/{WINDOWED_STORE}/{quoted(word)}")
            assert owner["partition"] == default_partition(word.encode("utf-8"), PARTITIONS)
            path = f"/state/windowed/{WINDOWED_STORE}/{quoted(word)}/0/{second_window + WINDOW_MS}"
            windows = [(first_window, truth_1[word]), (second_window, truth_2[word])]
            expected = [
                {"key": word, "windowStart": start, "windowEnd": start + WINDOW_MS, "value": n}
                for start, n in windows
                if n
            ]
            for instance in cluster.live():
                answer = await client.get(instance.url, path)
                assert (answer.status, answer.body) == (200, expected), f"windows of {word!r} via {instance.server}"
                assert answer.served_by == f"{owner['host']}:{owner['port']}"
            later = f"/state/windowed/{WINDOWED_STORE}/{quoted(word)}/{second_window}/{second_window}"
            assert await _same_everywhere(client, cluster, later) == [e for e in expected if e["windowStart"] == second_window]
        nothing = f"/state/windowed/{WINDOWED_STORE}/{quoted('absent-' + suffix)}/0/{second_window + WINDOW_MS}"
        assert await _same_everywhere(client, cluster, nothing) == []
    finally:
        await asyncio.gather(client.aclose(), cluster.close())
