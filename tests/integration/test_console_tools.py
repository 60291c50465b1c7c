"""`python -m streams_core.tools produce / consume` against the real broker, as kafka-console-producer
and kafka-console-consumer: keys parsed, values written with the named serde's bytes (what an
application reading with `Serdes.Long()` or `Serdes.Json()` expects) and decoded back."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from streams_core import Serdes
from streams_core.common.partitioner import default_partition
from tests.kafka_utils import create_topic, read_all, unique_topic

ROOT = Path(__file__).resolve().parents[2]


def _tool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams_core.tools", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


async def test_produce_and_consume_long_values(bootstrap_servers: str) -> None:
    topic = unique_topic("console-long")
    await create_topic(bootstrap_servers, topic, 3)
    produced = await asyncio.to_thread(
        _tool, "produce", topic, "--bootstrap-servers", bootstrap_servers, "--parse-key", "--value-serde", "long",
        "--null-marker", "NULL", stdin="alice\t3\nbob\t-5\n\nalice\tNULL\n",
    )
    assert produced.returncode == 0, produced.stderr[-2000:]
    raw = await read_all(bootstrap_servers, topic)
    by_offset = sorted(raw, key=lambda r: (r.partition, r.offset))
    assert sorted(((r.key, r.value) for r in by_offset), key=lambda kv: kv[0] or b"") == [
        (b"alice", Serdes.Long().serialize(topic, 3)), (b"alice", None), (b"bob", Serdes.Long().serialize(topic, -5)),
    ]  # fmt: skip
    assert {r.key: r.partition for r in raw} == {r.key: default_partition(r.key, 3) for r in raw}

    consumed = await asyncio.to_thread(
        _tool, "consume", topic, "--bootstrap-servers", bootstrap_servers, "--from-beginning", "--print-key",
        "--value-serde", "long", "--max-messages", "3", "--timeout-ms", "20000",
    )
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    lines = consumed.stdout.splitlines()
    assert sorted(lines) == sorted(["alice\t3", "bob\t-5", "alice\tnull"])
    assert lines.index("alice\t3") < lines.index("alice\tnull")  # one partition: in offset order


async def test_produce_and_consume_json_values_with_long_keys(bootstrap_servers: str) -> None:
    topic = unique_topic("console-json")
    await create_topic(bootstrap_servers, topic, 1)
    documents = ['{"user": "alice", "clicks": [1, 2]}', '{"user": "bob", "ok": true}']
    produced = await asyncio.to_thread(
        _tool, "produce", topic, "--bootstrap-server", bootstrap_servers, "--parse-key", "--key-separator", ":",
        "--key-serde", "long", "--value-serde", "json", stdin="".join(f"{i}:{d}\n" for i, d in enumerate(documents)),
    )
    assert produced.returncode == 0, produced.stderr[-2000:]
    raw = await read_all(bootstrap_servers, topic)
    assert [(Serdes.Long().deserialize(topic, r.key), json.loads(r.value)) for r in raw] == [
        (i, json.loads(d)) for i, d in enumerate(documents)
    ]  # fmt: skip
    consumed = await asyncio.to_thread(
        _tool, "consume", topic, "--bootstrap-servers", bootstrap_servers, "--from-beginning", "--print-key",
        "--print-timestamp", "--key-serde", "long", "--value-serde", "json", "--timeout-ms", "3000",
    )
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert [line.split("\t", 1)[1] for line in consumed.stdout.splitlines()] == [
        '0\t{"user":"alice","clicks":[1,2]}', '1\t{"user":"bob","ok":true}',
    ]  # fmt: skip
    assert all(line.startswith("CreateTime:") for line in consumed.stdout.splitlines())


async def test_bad_input_and_missing_topic_are_errors(bootstrap_servers: str) -> None:
    topic = unique_topic("console-bad")
    await create_topic(bootstrap_servers, topic, 1)
    bad = await asyncio.to_thread(_tool, "produce", topic, "--bootstrap-servers", bootstrap_servers,
                                  "--value-serde", "long", stdin="ten\n")  # fmt: skip
    assert bad.returncode == 1 and "line 1" in bad.stderr
    assert await read_all(bootstrap_servers, topic) == []  # nothing sent when a line cannot be read
    missing = await asyncio.to_thread(_tool, "consume", unique_topic("absent"), "--bootstrap-servers",
                                      bootstrap_servers, "--timeout-ms", "1000")  # fmt: skip
    assert missing.returncode == 1 and "does not exist" in missing.stderr
