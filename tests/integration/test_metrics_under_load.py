"""`/metrics` of a real two-instance word count: every documented name is there, and moves under load.

The names are read from docs/metrics.md (its first table column), so the document and the
exposition cannot drift apart.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.wordcount import STORE
from tests.integration.rest_cluster import REPO_ROOT, WordCountCluster, make_text, quoted, wait_until
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
COMMITS = "streams_thread_commit_latency_seconds_count"


def documented_names() -> list[str]:
    """The metric names docs/metrics.md lists (a backticked name opening a table row)."""
    text = (REPO_ROOT / "docs" / "metrics.md").read_text()
    return re.findall(r"^\| `(streams_[a-z_]+)`", text, flags=re.MULTILINE)


def totals(text: str) -> dict[str, float]:
    """Every sample summed over its labels, by sample name (`x_total`, `x_count`, `x_sum`, gauges)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name] = found.get(sample.name, 0.0) + sample.value
    return found


def names(text: str) -> set[str]:
    """Family and sample names (a counter's family drops `_total`, its samples keep it)."""
    found = set()
    for family in text_string_to_metric_families(text):
        found.add(family.name)
        found.update(sample.name for sample in family.samples)
    return found


async def test_metric_names_exist_and_move_under_load(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = unique_topic("metrics")
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, PARTITIONS)
    await create_topic(bootstrap_servers, output_topic, PARTITIONS)
    cluster = WordCountCluster(
        bootstrap_servers, tmp_path, f"metrics-{suffix}", input_topic=input_topic, output_topic=output_topic,
        instance_config={"b": {"num.stream.threads": 2, "stream.threads.mode": "process"}},  # b's threads: workers
    )  # fmt: skip
    try:
        await cluster.start_in_process("a", "b")
        await cluster.wait_running()
        a, b = cluster.live()
        async with httpx.AsyncClient(timeout=10) as http:
            before = {i.name: totals((await http.get(i.url + "/metrics")).text) for i in (a, b)}
            lines, truth = make_text(random.Random(17), words=30, lines=200)
            await produce(bootstrap_servers, input_topic, [Rec(f"k{n}".encode(), line.encode()) for n, line in enumerate(lines)])

            async def counted() -> bool:
                answer = await http.get(f"{a.url}/state/keyvalues/{STORE}/all")
                return answer.status_code == 200 and {e["key"]: e["value"] for e in answer.json()} == dict(truth)

            await wait_until(counted, 60, "the text counted")
            for word in list(truth)[:20]:  # asked at the instance that does not own it: forwarded
                owner = (await http.get(f"{a.url}/state/instance/{STORE}/{quoted(word)}")).json()
                other = b if f"{owner['host']}:{owner['port']}" == a.server else a
                assert (await http.get(f"{other.url}/state/keyvalue/{STORE}/{quoted(word)}")).status_code == 200
            texts: dict[str, str] = {}

            async def committed() -> bool:  # commits run every commit.interval.ms, after the processing
                texts.update({i.name: (await http.get(i.url + "/metrics")).text for i in (a, b)})
                return sum(totals(t).get(COMMITS, 0.0) - before[n].get(COMMITS, 0.0) for n, t in texts.items()) > 0

            await wait_until(committed, 30, "a commit after the processing")
    finally:
        await cluster.close()

    for name in documented_names():
        assert any(name in names(text) for text in texts.values()), f"{name} is documented but not exposed"
    after = {name: totals(text) for name, text in texts.items()}

    def moved(sample: str) -> float:
        return sum(after[i].get(sample, 0.0) - before[i].get(sample, 0.0) for i in after)

    assert moved("streams_thread_process_records_total") >= len(lines), "every line processed (and more after the repartition)"
    assert moved("streams_task_process_records_total") == moved("streams_thread_process_records_total")
    assert moved("streams_thread_process_latency_seconds_sum") > 0
    assert moved("streams_thread_poll_latency_seconds_count") > 0
    assert moved(COMMITS) > 0
    assert moved("streams_thread_produced_records_total") > 0
    assert moved("streams_cache_hits_total") + moved("streams_cache_misses_total") > 0
    assert moved("streams_query_duration_seconds_count") >= 41
    assert moved("streams_query_forwards_total") >= 20, "every lookup was asked at the instance that does not own the word"
    assert after["a"]["streams_partition_records_lag"] == 0, "caught up: nothing left to process"
    assert after["a"]['streams_state'] == 1
