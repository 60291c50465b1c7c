"""Interactive-query latency of the REST layer while the word-count app processes input.

    .venv/bin/python bench/query_latency.py --requests 500        (the recorded run)
    .venv/bin/python bench/query_latency.py --requests 100        (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir; `--bootstrap-servers` uses
a running one instead) and two instances of the word-count service as child processes
(`python -m app wordcount`, REST on free 127.0.0.1 ports). It produces every word of a
vocabulary of `--keys` distinct words once, waits until both instances answer for all of them,
then starts a feeder process that keeps producing lines of `--words-per-line` random words of
the vocabulary at `--rate` lines per second, and measures, one request at a time, over
loopback:

  local get     GET /state/keyvalue/word-count/<w> asked of the instance that owns <w>
  proxied get   the same asked of the other instance (it forwards the query, one hop)
  range 1000    GET /state/keyvalues/word-count/range/<from>/<to> over 1,000 distinct words
                (gathered from both instances and merged), asked of either instance in turn

Each scenario runs with two HTTP clients: `keep-alive` (one httpx.Client reusing its
connection: what an application does) and `new conn` (a connection per request). Each sends
at most `--requests` requests (after `--warmup` unmeasured ones) and stops after
`--max-seconds`; latency is from sending the request to having read the whole answer. Every
answer is checked (status 200, the right word, 1,000 entries in a range); others are counted
as errors and left out of the percentiles. The table also shows the records the instances
processed per second meanwhile (from their /metrics), which shows the app was busy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import multiprocessing
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE  # noqa: E402
from streams_core.testing.broker import LocalKafkaBroker  # noqa: E402

PARTITIONS = 4
RANGE_KEYS = 1000
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


# -- input ---------------------------------------------------------------------------------------


def make_vocabulary(size: int, rnd: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rnd.choice(_LETTERS) for _ in range(rnd.randint(4, 10))))
    return sorted(words)


async def _create_topics(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (INPUT_TOPIC, OUTPUT_TOPIC)])
    finally:
        await admin.close()


async def _produce(bootstrap: str, lines: list[str]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for line in lines:
            await producer.send(INPUT_TOPIC, line.encode())
        await producer.flush()
    finally:
        await producer.stop()


def _feed(bootstrap: str, vocabulary: list[str], words_per_line: int, rate: float, stop: Any, sent: Any) -> None:
    """In a child process: produce `rate` lines per second until `stop` is set; count them in `sent`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)

    async def run() -> None:
        from aiokafka import AIOKafkaProducer

        rnd = random.Random(7)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            began = time.monotonic()
            count = 0
            while not stop.is_set():
                due = int((time.monotonic() - began) * rate) + 1
                while count < due:
                    await producer.send(INPUT_TOPIC, " ".join(rnd.choices(vocabulary, k=words_per_line)).encode())
                    count += 1
                sent.value = count
                await asyncio.sleep(0.01)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


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


def _answers(url: str) -> Any:
    try:
        response = httpx.get(url, timeout=10)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def processed_records(instance: Instance) -> float:
    """streams_processed_records_total of an instance (from its /metrics)."""
    text = httpx.get(instance.url + "/metrics", timeout=10).text
    return sum(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith("streams_processed_records_total")
    )


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

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


@dataclass(frozen=True)
class Request:
    url: str
    check: Callable[[httpx.Response], bool]


def measure(
    scenario: str,
    client_kind: str,
    requests: Iterator[Request],
    *,
    count: int,
    warmup: int,
    max_seconds: float,
    instances: list[Instance],
) -> Result:
    limits = httpx.Limits() if client_kind == "keep-alive" else httpx.Limits(max_keepalive_connections=0)
    result = Result(scenario, client_kind)
    with httpx.Client(timeout=30, limits=limits) as client:
        for _ in range(warmup):
            client.get(next(requests).url)
        processed_before = sum(processed_records(i) for i in instances)
        began = time.perf_counter()
        for _ in range(count):
            request = next(requests)
            start = time.perf_counter()
            response = client.get(request.url)
            response.read()
            elapsed = time.perf_counter() - start
            if response.status_code == 200 and request.check(response):
                result.latencies_ms.append(elapsed * 1000)
            else:
                result.errors += 1
            if time.perf_counter() - began > max_seconds:
                break
        result.seconds = time.perf_counter() - began
    result.processed_per_s = (sum(processed_records(i) for i in instances) - processed_before) / result.seconds
    return result


def key_requests(words: list[str], ask: Callable[[str], Instance], rnd: random.Random) -> Iterator[Request]:
    while True:
        word = rnd.choice(words)

        def check(response: httpx.Response, word: str = word) -> bool:
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


# -- the run -------------------------------------------------------------------------------------


def machine() -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def run(args: argparse.Namespace, bootstrap: str, root: Path) -> None:
    rnd = random.Random(args.seed)
    vocabulary = make_vocabulary(args.keys, rnd)
    app_id = f"bench-query-latency-{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_topics(bootstrap))
    shuffled = rnd.sample(vocabulary, len(vocabulary))
    asyncio.run(_produce(bootstrap, [" ".join(shuffled[i : i + 10]) for i in range(0, len(shuffled), 10)]))

    instances = start_instances(bootstrap, root, app_id, 2)
    stop = multiprocessing.Event()
    sent = multiprocessing.Value("q", 0)
    feeder = multiprocessing.Process(
        target=_feed, args=(bootstrap, vocabulary, args.words_per_line, args.rate, stop, sent), daemon=True
    )
    try:
        wait_for(lambda: all(_answers(i.url + "/ready") for i in instances), 120, "both instances RUNNING", instances)
        first = instances[0]
        all_url = f"{first.url}/state/keyvalues/{STORE}/all"
        words = set(vocabulary)

        def counted() -> bool:
            return words <= {entry["key"] for entry in _answers(all_url) or ()}

        wait_for(counted, 120, "every word counted", instances)
        owner_of: dict[str, Instance] = {}
        by_server = {i.server: i for i in instances}
        for server, part in ((i.server, _answers(f"{i.url}/state/keyvalues/{STORE}/all?scope=local")) for i in instances):
            for entry in part or ():
                if entry["key"] in words:  # (a used broker's TextLinesTopic may hold other words)
                    owner_of[entry["key"]] = by_server[server]
        assert len(owner_of) == len(vocabulary), "every word has an owner"
        share = {i.name: sum(1 for o in owner_of.values() if o is i) for i in instances}
        print(f"word-count keys per instance: {share}", flush=True)

        def other(instance: Instance) -> Instance:
            return next(i for i in instances if i is not instance)

        feeder.start()
        time.sleep(args.settle)
        results = []
        scenarios: list[tuple[str, Callable[[], Iterator[Request]]]] = [
            ("local get", lambda: key_requests(vocabulary, lambda w: owner_of[w], rnd)),
            ("proxied get", lambda: key_requests(vocabulary, lambda w: other(owner_of[w]), rnd)),
            (f"range {RANGE_KEYS}", lambda: range_requests(vocabulary, instances, rnd)),
        ]
        for scenario, requests in scenarios:
            for client_kind in ("keep-alive", "new conn"):
                result = measure(
                    scenario, client_kind, requests(), count=args.requests, warmup=args.warmup,
                    max_seconds=args.max_seconds, instances=instances,
                )  # fmt: skip
                results.append(result)
                print(f"  {scenario:12} {client_kind:10} {len(result.latencies_ms)} answers in {result.seconds:.1f} s",
                      flush=True)  # fmt: skip
        stop.set()
        feeder.join(timeout=30)
        print_table(args, results, sent.value, instances)
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(timeout=10)
            if feeder.is_alive():
                feeder.kill()
        stop_instances(instances)


def print_table(args: argparse.Namespace, results: list[Result], lines_sent: int, instances: list[Instance]) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print()
    print(f"query latency, {now}; {machine()}")
    print(f"2 word-count instances + broker on this machine, loopback HTTP; feeder {args.rate:g} lines/s x "
          f"{args.words_per_line} words ({lines_sent} lines sent); {args.keys} distinct words; "
          f"--requests {args.requests} --max-seconds {args.max_seconds:g}")  # fmt: skip
    print()
    header = f"| {'query':12} | {'client':10} | {'answers':>7} | {'errors':>6} | {'p50 ms':>7} | {'p99 ms':>7} | " \
             f"{'max ms':>7} | {'mean ms':>7} | {'records/s processed':>19} |"  # fmt: skip
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for r in results:
        mean = statistics.fmean(r.latencies_ms) if r.latencies_ms else float("nan")
        top = max(r.latencies_ms) if r.latencies_ms else float("nan")
        print(f"| {r.scenario:12} | {r.client:10} | {len(r.latencies_ms):>7} | {r.errors:>6} | "
              f"{r.percentile(50):>7.1f} | {r.percentile(99):>7.1f} | {top:>7.1f} | {mean:>7.1f} | "
              f"{r.processed_per_s:>19.0f} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="measured requests per scenario and client")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time limit of each scenario and client")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured requests before each measurement")
    parser.add_argument("--keys", type=int, default=2000, help=f"distinct words (at least {RANGE_KEYS})")
    parser.add_argument("--rate", type=float, default=100.0, help="lines per second the feeder produces meanwhile")
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of feeding before measuring")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.keys < RANGE_KEYS:
        parser.error(f"--keys must be at least {RANGE_KEYS}")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.INFO if args.verbose else logging.ERROR)
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C: instances, feeder and broker are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="bench-query-latency-") as tmp:
        root = Path(tmp)
        if args.bootstrap_servers:
            run(args, args.bootstrap_servers, root)
            return 0
        broker = LocalKafkaBroker(root / "broker")
        try:
            broker.start()
            print(f"broker {broker.bootstrap_servers} up in {broker.startup_seconds or 0:.1f} s", flush=True)
            run(args, broker.bootstrap_servers, root)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
