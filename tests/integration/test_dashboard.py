"""The dashboard at `/ui` in a real browser: Debian's chromium, driven by Playwright, over a live
two-instance word count on the real broker (issue 17).

The page of one instance must load without a console error, show both instances with their
tasks (and the standby tasks each keeps of the other), draw every node of the topology, and a
key lookup of a word the other instance owns must show that owner and the word's count, as the
test counted it independently. Skipped only when no chromium executable is found.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.demo import find_chromium
from app.wordcount import STORE, build_topology
from tests.integration.group_protocol import standby_replicas_of_the_group
from tests.integration.rest_cluster import Client, WordCountCluster, make_text, quoted, wait_until
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 2
CHROMIUM = find_chromium()


def _rows_script() -> str:
    """JS giving the instances table as [{instance, cells}]."""
    return """() => [...document.querySelectorAll('#instances tbody tr')].map(tr => ({
        instance: tr.dataset.instance, cells: [...tr.children].map(td => td.textContent)}))"""


def _active_tasks(member: dict[str, Any], input_topic: str, output_topic: str, application_id: str) -> str:
    """The task ids of a member's source partitions (`<sub-topology>_<partition>`), as the page lists them."""
    sub_of: dict[str, int] = {}
    for sub in build_topology(input_topic, output_topic).describe().subtopologies:
        for node in sub.nodes:
            for topic in getattr(node, "topics", ()):  # sources; internal topics carry the application id
                sub_of[topic] = sub_of[f"{application_id}-{topic}"] = sub.id
    tasks = {(sub_of[tp["topic"]], tp["partition"]) for tp in member["topicPartitions"]}
    return ", ".join(f"{sub}_{partition}" for sub, partition in sorted(tasks))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable (apt-get install chromium, or set $CHROMIUM)")
async def test_dashboard_shows_both_instances_and_looks_up_a_key(bootstrap_servers: str, tmp_path: Path) -> None:
    from playwright.async_api import ConsoleMessage, async_playwright

    suffix = unique_topic("ui")
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, PARTITIONS)
    await create_topic(bootstrap_servers, output_topic, PARTITIONS)
    lines, truth = make_text(random.Random(17), words=30, lines=40)

    cluster = WordCountCluster(
        bootstrap_servers, tmp_path, f"ui-{suffix}", input_topic=input_topic, output_topic=output_topic, standby_replicas=1,
        instance_config={"b": {"num.stream.threads": 2}},  # b's two threads are worker processes
    )  # fmt: skip
    client = Client()
    await standby_replicas_of_the_group(bootstrap_servers, cluster.application_id, 1)
    try:
        await cluster.start_in_process("a", "b")
        await cluster.wait_running()
        first, second = cluster.live()
        await produce(bootstrap_servers, input_topic, [Rec(f"l{n}".encode(), line.encode()) for n, line in enumerate(lines)])

        async def counted() -> bool:
            answer = await client.get(first.url, f"/state/keyvalues/{STORE}/all")
            return answer.status == 200 and Counter({e["key"]: e["value"] for e in answer.body}) == truth

        await wait_until(counted, 60, "the text counted")
        members = await client.ok(first.url, "/state/instances")
        owners = {w: await client.ok(first.url, f"/state/instance/{STORE}/{quoted(w)}") for w in sorted(truth)}
        word = next((w for w, o in owners.items() if o["port"] == second.port), sorted(truth)[0])
        owner = f"{owners[word]['host']}:{owners[word]['port']}"

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = await browser.new_page()
                errors: list[str] = []

                def on_console(message: ConsoleMessage) -> None:
                    if message.type == "error":
                        errors.append(f"console: {message.text} at {message.location}")

                page.on("console", on_console)
                page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
                page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
                await page.goto(first.url + "/ui")

                # Both instances, RUNNING, with their active tasks as discovery names them.
                await page.wait_for_function(
                    "[...document.querySelectorAll('#instances tbody tr td:nth-child(2)')]"
                    ".filter(td => td.textContent === 'RUNNING').length === 2",
                    timeout=20_000,
                )
                # The page and discovery read at about the same moment: under the streams protocol the
                # broker may still move a task after every instance is RUNNING, so both are read again
                # (the page polls) until they agree, by a deadline.
                deadline = asyncio.get_running_loop().time() + 30
                while True:
                    rows = {row["instance"]: row["cells"] for row in await page.evaluate(_rows_script())}
                    members = await client.ok(first.url, "/state/instances")
                    shown = {f"{m['host']}:{m['port']}": rows.get(f"{m['host']}:{m['port']}", [None] * 3)[2] for m in members}
                    expected = {
                        f"{m['host']}:{m['port']}": _active_tasks(m, input_topic, output_topic, cluster.application_id)
                        for m in members
                    }
                    if shown == expected or asyncio.get_running_loop().time() > deadline:
                        break
                    await asyncio.sleep(0.5)
                assert sorted(rows) == sorted(i.server for i in cluster.live())
                assert shown == expected, members
                assert rows[first.server][9] == "StreamThread-1", "one thread, on the instance's loop"
                assert re.fullmatch(
                    r"StreamThread-1 \(worker \d+\), StreamThread-2 \(worker \d+\)", rows[second.server][9]
                ), rows[second.server]

                # Each keeps a standby of the other's stateful tasks, read from its relayed metrics.
                standby_members = [f"{m['host']}:{m['port']}" for m in members if m["standbyStoreNames"]]
                assert standby_members, f"one standby replica, yet no instance keeps a standby: {members}"
                await page.wait_for_function(
                    """(names) => names.every(name => {
                        const row = document.querySelector(`#instances tbody tr[data-instance="${name}"]`);
                        return row && /\\d+_\\d+/.test(row.children[3].textContent); })""",
                    arg=standby_members,
                    timeout=20_000,
                )

                # The topology: one box per node, sub-topologies as the description has them.
                description = build_topology(input_topic, output_topic).describe()
                expected_nodes = sorted(node.name for sub in description.subtopologies for node in sub.nodes)
                drawn: list[Any] = await page.evaluate(
                    "[...document.querySelectorAll('#topology g.node')].map(g => g.dataset.name)"
                )
                assert sorted(drawn) == expected_nodes
                assert await page.locator("#topology g.subtopology").count() == len(description.subtopologies)

                # The key lookup: owner and value of a word (owned by the other instance when one is).
                await page.select_option("#lookup-store", STORE)
                await page.fill("#lookup-key", word)
                await page.click("#lookup button")
                await page.wait_for_function("document.getElementById('lookup-value').textContent !== ''")
                assert await page.text_content("#lookup-owner") == owner
                assert await page.text_content("#lookup-value") == str(truth[word])
                assert await page.text_content("#lookup-served-by") == owner
                assert await page.text_content("#lookup-partition") == str(owners[word]["partition"])

                # A few polls later: the throughput legend names both instances, still no error.
                await page.wait_for_function(
                    "document.querySelectorAll('#sparkline polyline').length === 2", timeout=20_000
                )
                assert errors == []
            finally:
                await browser.close()
    finally:
        await client.aclose()
        await cluster.close()
