"""`python -m app wordcount` with two worker processes and STREAMS_LOG_FORMAT=json (issue 35, item 5):
every line the service writes, its own and its workers', on stdout and stderr, through a worker
killed and replaced and a clean shutdown, is one JSON object, with the thread and task context."""

from __future__ import annotations

import json
import os
import random
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC
from tests.integration.rest_cluster import Client, WordCountCluster, make_text, quoted, wait_until
from tests.kafka_utils import Rec, create_topic, produce

pytestmark = pytest.mark.broker

STORE = "word-count"


def worker_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def entries(log: Path) -> list[dict[str, Any]]:
    """Every line of the log as JSON (AssertionError naming the first lines that are not)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    plain = []
    for line in lines:
        try:
            if not isinstance(json.loads(line), dict):
                plain.append(line)
        except ValueError:
            plain.append(line)
    assert plain == [], f"{len(plain)} of {len(lines)} lines are not JSON objects: {plain[:5]}"
    return [json.loads(line) for line in lines]


@pytest.mark.slow
async def test_every_line_of_a_two_worker_service_is_json(bootstrap_servers: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
        await create_topic(bootstrap_servers, topic, 4)
    env = {"STREAMS_LOG_FORMAT": "json", "STREAMS_NUM_STREAM_THREADS": "2", "STREAMS_SESSION_TIMEOUT_MS": "6000"}
    cluster = WordCountCluster(bootstrap_servers, tmp_path, f"json-logs-{tag}", env=env)
    client = Client()
    lines, truth = make_text(random.Random(tag), words=10, lines=40, suffix=f"-{tag}")
    try:
        instance = await cluster.start_process("i0")
        assert instance.process is not None and instance.log_path is not None
        await produce(bootstrap_servers, INPUT_TOPIC, [Rec(f"{tag}-{n}".encode(), line.encode()) for n, line in enumerate(lines)])

        async def counted() -> bool:  # at least: at-least-once counts again what a killed worker had not committed
            for word, count in truth.items():
                answer = await client.get(instance.url, f"/state/keyvalue/{STORE}/{quoted(word)}")
                if answer.status != 200 or answer.body["value"] < count:
                    return False
            return True

        await wait_until(counted, 90, "the words counted")
        pid = instance.process.pid
        first, _second = worker_pids(pid)
        os.kill(first, signal.SIGKILL)  # the service's handler replaces it
        await wait_until(lambda: first not in worker_pids(pid) and len(worker_pids(pid)) == 2, 60, "a new worker")
        await wait_until(counted, 90, "the words counted after the replacement")
    finally:
        await client.aclose()
        await cluster.close()
    logged = entries(instance.log_path)
    threads = {e.get("thread") for e in logged if e["logger"] == "streams_core.runtime.threads.stream_thread"}
    assert threads == {f"json-logs-{tag}-StreamThread-1", f"json-logs-{tag}-StreamThread-2"}, "the workers' own lines"
    assert any("task" in e for e in logged), "task context from the workers' task managers"
    died = [e for e in logged if e["logger"] == "streams_core.runtime.kafka_streams" and "WorkerDiedError" in e["message"]]
    assert died, "the instance logged the dead worker"
