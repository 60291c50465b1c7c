"""`make demo`: a local broker, two word-count instances (the second with two stream threads as
worker processes, so it uses two cores), sample text, the queries to try and the dashboard of each
instance.

Everything lives under `.cache/demo/` (fresh each run); instance logs go to files there. Ctrl-C
stops the instances (SIGTERM: they commit and leave the group) and then the broker.
`--screenshot PATH` saves a PNG of the dashboard while text flows in (docs/dashboard.png is
made so; it needs Playwright, a dev dependency, and a chromium executable) and then stops.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE, WINDOWED_STORE
from streams_core import StreamsConfig, clients
from streams_core.broker import LocalKafkaBroker

__all__ = ["CHROMIUM_CANDIDATES", "find_chromium", "run_demo"]

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "/usr/bin/chromium")
"""Browsers Playwright can drive with `executable_path` (Debian's chromium first); $CHROMIUM overrides."""

SAMPLE_TEXT = [
    "all streams lead to kafka",
    "hello kafka streams",
    "join kafka summit",
    "the quick brown fox jumps over the lazy dog",
    "hello world hello python",
    "streams of streams of streams",
]


_INSTANCE_ENV: list[dict[str, str]] = [{}, {"STREAMS_NUM_STREAM_THREADS": "2", "STREAMS_STREAM_THREADS_MODE": "process"}]
"""Instance 2 runs its two stream threads as worker processes (docs/runtime.md)."""
_INSTANCE_WHAT = ["one stream thread", "two stream threads, each a worker process"]


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


def find_chromium() -> str | None:
    """The chromium executable to drive (the system's: Playwright's own browser download is not used)."""
    for candidate in filter(None, (os.environ.get("CHROMIUM"), *CHROMIUM_CANDIDATES)):
        found = shutil.which(candidate)
        if found:
            return found
    return None


async def _feed(bootstrap: str, stop: threading.Event) -> None:
    """Sample lines, about a hundred a second until `stop`, so the dashboard has throughput to show."""
    producer = clients.create_producer(StreamsConfig({"application.id": "demo-feeder", "bootstrap.servers": bootstrap}))
    await producer.start()
    try:
        n = 0
        while not stop.is_set():
            for line in SAMPLE_TEXT:
                await producer.send(INPUT_TOPIC, value=line.encode(), key=f"feed-{n}".encode())
                n += 1
            await asyncio.sleep(0.06)
        await producer.flush()
    finally:
        await producer.stop()


def _screenshot(url: str, bootstrap: str, path: Path, settle_s: float = 50.0) -> None:
    """Open the dashboard in headless chromium while text flows in, look up a word, save a PNG."""
    from playwright.sync_api import sync_playwright  # dev dependency: only the screenshot needs it

    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError("no chromium executable found (apt-get install chromium, or set $CHROMIUM)")
    stop = threading.Event()
    feeder = threading.Thread(target=lambda: asyncio.run(_feed(bootstrap, stop)), name="demo-feeder")
    feeder.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.wait_for_function("document.querySelectorAll('#instances tbody tr').length >= 2")
                page.wait_for_timeout(settle_s * 1000)  # the sparkline fills at one point per poll
                page.select_option("#lookup-store", STORE)
                page.fill("#lookup-key", "streams")
                page.click("#lookup button")
                page.wait_for_function("document.getElementById('lookup-value').textContent !== ''")
                page.wait_for_timeout(2500)  # one more poll: the owner's row is highlighted
                path.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(path), full_page=True)
            finally:
                browser.close()
    finally:
        stop.set()
        feeder.join(timeout=30)
    _say(f"Saved a screenshot of {url} to {path}")


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


def run_demo(*, base_port: int = 7071, once: bool = False, screenshot: Path | None = None) -> int:
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
        for i, (port, env, what) in enumerate(zip(ports, _INSTANCE_ENV, _INSTANCE_WHAT, strict=True)):
            log_file = open(root / f"wordcount-{i + 1}.log", "wb")
            instances.append(
                subprocess.Popen(
                    [sys.executable, "-m", "app", "wordcount", "--bootstrap-servers", bootstrap,
                     "--application-server", f"127.0.0.1:{port}", "--state-dir", str(root / f"state-{i + 1}")],
                    stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, **env},
                )
            )
            _say(f"Started word-count instance {i + 1} ({what}) on http://127.0.0.1:{port} (log: {root}/wordcount-{i + 1}.log)")
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
        _say(f"  curl -s http://127.0.0.1:{ports[1]}/metrics | grep -i thread   (instance 2: a worker process per thread)")
        _say("\nThe dashboard (topology, instances with their tasks and lags, throughput, key lookup), on every instance:")
        for port in ports:
            _say(f"  http://127.0.0.1:{port}/ui")
        _say(f"\nMore text: type lines into {INPUT_TOPIC} with any Kafka producer at {bootstrap}.")
        if screenshot is not None:
            _screenshot(f"{first}/ui", bootstrap, screenshot)
            return 0
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
