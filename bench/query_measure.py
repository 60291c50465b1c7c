"""The instances and the measuring of bench/query_latency.py: child processes of the word-count
service, their processed-records and CPU counters, and the query loops (back to back, paced,
interleaved with quiet periods, paging)."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.wordcount import STORE  # noqa: E402
from bench.raw_http import RawHttpClient  # noqa: E402

RANGE_KEYS = 1000
PROCESSED_METRIC = "streams_thread_process_records_total"


# -- instances -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Instance:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_instances(bootstrap: str, root: Path, app_id: str, count: int) -> list[Instance]:
    instances = []
    for i in range(count):
        port = _free_port()
        log = root / f"instance-{i}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "app", "--log-level", "WARNING", "wordcount",
                 "--bootstrap-servers", bootstrap, "--application-server", f"127.0.0.1:{port}",
                 "--state-dir", str(root / f"state-{i}"), "--application-id", app_id],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        instances.append(Instance(f"instance-{i}", port, process, log))
    return instances


def wait_for(check: Callable[[], bool], timeout: float, what: str, instances: list[Instance]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for instance in instances:
            if instance.process.poll() is not None:
                raise RuntimeError(f"{instance.name} exited: {instance.log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.3)


def answers(url: str) -> Any:
    try:
        response = httpx.get(url, timeout=10)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def processed_records(instance: Instance) -> float:
    """Records the stream threads of an instance processed so far (from its /metrics)."""
    text = httpx.get(instance.url + "/metrics", timeout=10).text
    counts = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(PROCESSED_METRIC)]
    if not counts:
        raise RuntimeError(f"{instance.name}: no {PROCESSED_METRIC} in /metrics")
    return sum(counts)


def cpu_seconds(instances: list[Instance]) -> float:
    """CPU time (user + system) the instance processes used so far, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for instance in instances:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{instance.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


class CpuShare:
    """The CPU the instances and this client used over a stretch, in cores (1.0 = one core busy)."""

    def __init__(self, instances: list[Instance]) -> None:
        self.instances = instances
        self.began = (time.perf_counter(), cpu_seconds(instances), time.process_time())

    def __str__(self) -> str:
        wall = time.perf_counter() - self.began[0]
        servers = (cpu_seconds(self.instances) - self.began[1]) / wall
        client = (time.process_time() - self.began[2]) / wall
        return f"cpu: instances {servers:.2f}, client {client:.2f} cores"


def stop_instances(instances: list[Instance]) -> None:
    for instance in instances:
        if instance.process.poll() is None:
            instance.process.send_signal(signal.SIGTERM)
    for instance in instances:
        try:
            instance.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            instance.process.kill()
            instance.process.wait(timeout=10)


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    client: str
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    processed_per_s: float = 0.0
    note: str = ""
    baseline_index: int = -1
    """The no-query measurement just before this one (the one after is the next)."""
    quiet_per_s: float | None = None
    """With `--interleave`: the processing rate of this scenario's own periods without queries."""
    pair_ratios: list[float] = field(default_factory=list)
    """With `--interleave`: each query period's rate over the quiet period before it."""

    def baseline(self, baselines: list[float]) -> float:
        """The processing rate without queries around this measurement: the mean of the two."""
        if self.quiet_per_s is not None:
            return self.quiet_per_s
        around = baselines[self.baseline_index : self.baseline_index + 2] if self.baseline_index >= 0 else []
        return statistics.fmean(around) if around else float("nan")

    def ask(self, client: Any, request: Request) -> None:
        """Send one request: its latency when the answer is right, else an error."""
        start = time.perf_counter()
        response = client.get(request.url)
        elapsed = time.perf_counter() - start
        if response.status_code == 200 and request.check(response):
            self.latencies_ms.append(elapsed * 1000)
        else:
            self.errors += 1

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


@dataclass(frozen=True)
class Request:
    url: str
    check: Callable[[Any], bool]
    """Whether a 200 answer (a `RawResponse` or an `httpx.Response`) is the right one."""


def _client(kind: str, keep_alive: bool) -> Any:
    """The benchmark's HTTP client: `raw` (bench/raw_http.py, cheapest) or `httpx` (the runs before 2026-11-26 evening)."""
    if kind == "raw":
        return RawHttpClient(keep_alive=keep_alive)
    limits = httpx.Limits() if keep_alive else httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(timeout=30, limits=limits)


def measure(
    scenario: str,
    client_kind: str,
    requests: Iterator[Request],
    *,
    count: int,
    warmup: int,
    max_seconds: float,
    instances: list[Instance],
    http: str = "raw",
    interleave: float = 0.0,
    rate: float = 0.0,
) -> Result:
    """Latencies of up to `count` requests in `max_seconds`, and the processing meanwhile.

    `interleave` > 0 alternates quiet periods of that length with query periods of the same
    length (quiet first) until `max_seconds` of queries: the processing rate's drift over a run
    (tens of seconds) then falls on both alike, and the result carries its own baseline.
    `rate` > 0 paces the requests at that many a second (else one right after the other).
    """
    result = Result(scenario, client_kind)
    with _client(http, client_kind == "keep-alive") as client:
        for _ in range(warmup):
            client.get(next(requests).url)

        def ask_until(deadline: float) -> None:
            due = time.perf_counter()
            while time.perf_counter() < deadline and len(result.latencies_ms) + result.errors < count:
                if rate > 0:
                    due += 1 / rate
                    time.sleep(max(0.0, min(due, deadline) - time.perf_counter()))
                    if time.perf_counter() >= deadline:
                        break
                result.ask(client, next(requests))

        if interleave <= 0:
            processed_before = sum(processed_records(i) for i in instances)
            cpu = CpuShare(instances)
            began = time.perf_counter()
            ask_until(began + max_seconds)
            result.seconds = time.perf_counter() - began
            result.note = str(cpu)
            result.processed_per_s = (sum(processed_records(i) for i in instances) - processed_before) / result.seconds
            return result
        quiet = [0.0, 0.0]  # records, seconds
        busy = [0.0, 0.0, 0.0, 0.0]  # records, seconds, instance CPU seconds, client CPU seconds
        while busy[1] < max_seconds and len(result.latencies_ms) + result.errors < count:
            r0, t0 = sum(processed_records(i) for i in instances), time.perf_counter()
            time.sleep(interleave)
            r1, t1 = sum(processed_records(i) for i in instances), time.perf_counter()
            c1, k1 = cpu_seconds(instances), time.process_time()
            ask_until(t1 + interleave)
            r2, t2 = sum(processed_records(i) for i in instances), time.perf_counter()
            quiet[0] += r1 - r0
            quiet[1] += t1 - t0
            busy[0] += r2 - r1
            busy[1] += t2 - t1
            busy[2] += cpu_seconds(instances) - c1
            busy[3] += time.process_time() - k1
            if r1 > r0:
                result.pair_ratios.append(((r2 - r1) / (t2 - t1)) / ((r1 - r0) / (t1 - t0)))
    result.seconds = busy[1]
    result.processed_per_s = busy[0] / busy[1]
    result.quiet_per_s = quiet[0] / quiet[1]
    ratios = sorted(result.pair_ratios)
    spread = f"{ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}" if ratios else "-"
    result.note = (
        f"cpu: instances {busy[2] / busy[1]:.2f}, client {busy[3] / busy[1]:.2f} cores; "
        f"{len(ratios)} pairs of {interleave:g} s, quartiles of their ratios {spread}"
    )
    return result


def key_requests(words: list[str], ask: Callable[[str], Instance], rnd: random.Random) -> Iterator[Request]:
    while True:
        word = rnd.choice(words)

        def check(response: Any, word: str = word) -> bool:
            return bool(response.json().get("key") == word)

        yield Request(f"{ask(word).url}/state/keyvalue/{STORE}/{quote(word, safe='')}", check)


def range_requests(vocabulary: list[str], instances: list[Instance], rnd: random.Random) -> Iterator[Request]:
    turn = 0
    while True:
        start = rnd.randrange(0, len(vocabulary) - RANGE_KEYS + 1)
        lower, upper = vocabulary[start], vocabulary[start + RANGE_KEYS - 1]
        instance = instances[turn % len(instances)]
        turn += 1
        yield Request(
            f"{instance.url}/state/keyvalues/{STORE}/range/{quote(lower, safe='')}/{quote(upper, safe='')}",
            lambda response: len(response.json()) >= RANGE_KEYS,
        )


def processed_per_second(instances: list[Instance], seconds: float) -> tuple[float, CpuShare]:
    """Records/s the instances process over `seconds` with no queries (the baseline), and their CPU."""
    before = sum(processed_records(i) for i in instances)
    cpu = CpuShare(instances)
    began = time.perf_counter()
    time.sleep(seconds)
    return (sum(processed_records(i) for i in instances) - before) / (time.perf_counter() - began), cpu


def read_all_pages(client: httpx.Client, url: str, page_size: int, latencies_ms: list[float] | None = None) -> list[str]:
    """Every key of `url` (an `all` route), read page by page following `X-Next-After`."""
    keys: list[str] = []
    after: str | None = None
    target = httpx.URL(url)
    fixed = dict(target.params)  # httpx drops the URL's own query (scope=local) when given params
    while True:
        params = {**fixed, "limit": str(page_size)} if after is None else {**fixed, "limit": str(page_size), "after": after}
        start = time.perf_counter()
        response = client.get(target.copy_with(query=None), params=params)
        response.read()
        elapsed = time.perf_counter() - start
        response.raise_for_status()
        if latencies_ms is not None:
            latencies_ms.append(elapsed * 1000)
        keys.extend(entry["key"] for entry in response.json())
        after = response.headers.get("x-next-after")
        if after is None:
            return keys


def measure_paging(
    args: argparse.Namespace,
    words: set[str],
    instances: list[Instance],
    gets: Iterator[Request],
) -> tuple[Result, Result]:
    """Whole passes over the store in pages, with local gets sent concurrently by another client."""
    pages = Result(f"page {args.page_size}", "keep-alive")
    concurrent = Result("local get", "keep-alive", note="during paging")
    done = threading.Event()

    def get_meanwhile() -> None:
        with _client(args.client, keep_alive=True) as client:
            while not done.is_set():
                concurrent.ask(client, next(gets))

    url = f"{instances[0].url}/state/keyvalues/{STORE}/all"
    passes = 0
    with httpx.Client(timeout=60) as client:
        read_all_pages(client, url, args.page_size)  # warm-up pass
        processed_before = sum(processed_records(i) for i in instances)
        cpu = CpuShare(instances)
        getter = threading.Thread(target=get_meanwhile, daemon=True)
        began = time.perf_counter()
        getter.start()
        try:
            while passes == 0 or time.perf_counter() - began < args.paging_seconds:
                keys = read_all_pages(client, url, args.page_size, pages.latencies_ms)
                ours = [k for k in keys if k in words]
                if len(ours) != len(words) or any(a >= b for a, b in itertools.pairwise(keys)):
                    pages.errors += 1
                passes += 1
        finally:
            done.set()
            getter.join(timeout=30)
        pages.seconds = concurrent.seconds = time.perf_counter() - began
    processed = (sum(processed_records(i) for i in instances) - processed_before) / pages.seconds
    pages.processed_per_s = concurrent.processed_per_s = processed
    concurrent.note = str(cpu)
    pages.note = f"{passes} passes, {len(pages.latencies_ms) / pages.seconds:.1f} pages/s"
    return pages, concurrent
