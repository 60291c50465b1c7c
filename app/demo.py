"""`make demo`: a local broker, two word-count instances, sample text, and the queries to try.

Everything lives under `.cache/demo/` (fresh each run); instance logs go to files there. Ctrl-C
stops the instances (SIGTERM: they commit and leave the group) and then the broker.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE, WINDOWED_STORE
from streams_core import StreamsConfig, clients
from streams_core.testing.broker import LocalKafkaBroker

__all__ = ["run_demo"]

SAMPLE_TEXT = [
    "all streams lead to kafka",
    "hello kafka streams",
    "join kafka summit",
    "the quick brown fox jumps over the lazy dog",
    "hello world hello python",
    "streams of streams of streams",
]


def _say(text: str = "") -> None:
    print(text, flush=True)


async def _produce_sample(bootstrap: str) -> None:
    config = StreamsConfig({"application.id": "demo-producer", "bootstrap.servers": bootstrap})
    admin = clients.create_admin(config)
    await admin.start()
    try:
        await clients.InternalTopicManager(admin).ensure_topics(
            [clients.NewTopicSpec(INPUT_TOPIC, 4), clients.NewTopicSpec(OUTPUT_TOPIC, 4)]
        )
    finally:
        await admin.close()
    producer = clients.create_producer(config)
    await producer.start()
    try:
        for i, line in enumerate(SAMPLE_TEXT):
            await producer.send(INPUT_TOPIC, value=line.encode(), key=f"line-{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()


def _wait_for(url: str, timeout: float) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last: Exception | httpx.Response | None = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response
            last = response
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.5)
    raise RuntimeError(f"no answer from {url} within {timeout}s (last: {last!r})")


def _show(url: str) -> None:
    response = httpx.get(url, timeout=5)
    served_by = response.headers.get("x-served-by", "-")
    body = response.text if len(response.text) < 400 else response.text[:400] + "..."
    _say(f"  curl -s {url}\n    -> {response.status_code} (served by {served_by}) {body}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(*, base_port: int = 7071, once: bool = False) -> int:
    root = Path(".cache/demo").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    broker = LocalKafkaBroker(root / "broker", port=0)
    instances: list[subprocess.Popen[bytes]] = []
    try:
        _say("Starting a local Kafka broker...")
        broker.start()
        bootstrap = broker.bootstrap_servers
        _say(f"Kafka is at {bootstrap}")
        asyncio.run(_produce_sample(bootstrap))
        _say(f"Produced {len(SAMPLE_TEXT)} lines to {INPUT_TOPIC}")
        ports = [base_port, base_port + 1]
        for i, port in enumerate(ports):
            log_file = open(root / f"wordcount-{i + 1}.log", "wb")
            instances.append(
                subprocess.Popen(
                    [sys.executable, "-m", "app", "wordcount", "--bootstrap-servers", bootstrap,
                     "--application-server", f"127.0.0.1:{port}", "--state-dir", str(root / f"state-{i + 1}")],
                    stdout=log_file, stderr=subprocess.STDOUT,
                )
            )
            _say(f"Started word-count instance {i + 1} on http://127.0.0.1:{port} (log: {root}/wordcount-{i + 1}.log)")
        for port in ports:
            _wait_for(f"http://127.0.0.1:{port}/ready", 90)
        first = f"http://127.0.0.1:{ports[0]}"
        _wait_for(f"{first}/state/keyvalue/{STORE}/streams", 60)
        now = int(time.time() * 1000)
        _say("\nBoth instances are RUNNING. Try these (any instance answers for every key):\n")
        for url in (
            f"{first}/state/instances",
            f"{first}/state/instances/{STORE}",
            f"{first}/state/instance/{STORE}/kafka",
            f"{first}/state/keyvalue/{STORE}/streams",
            f"http://127.0.0.1:{ports[1]}/state/keyvalue/{STORE}/streams",
            f"{first}/state/keyvalues/{STORE}/all",
            f"{first}/state/keyvalues/{STORE}/range/a/k",
            f"{first}/state/windowed/{WINDOWED_STORE}/hello/0/{now}",
            f"{first}/health",
            f"{first}/ready",
        ):
            _show(url)
        _say(f"  curl -s {first}/metrics | head")
        _say(f"\nMore text: type lines into {INPUT_TOPIC} with any Kafka producer at {bootstrap}.")
        if once:
            return 0
        _say("Press Ctrl-C to stop everything.")
        signal.signal(signal.SIGTERM, _interrupt)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        _say(f"demo failed: {exc}")
        return 1
    finally:
        _say("Stopping the word-count instances and the broker...")
        for process in instances:
            process.send_signal(signal.SIGTERM)
        for process in instances:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        broker.stop()
