"""Interactive-query latency of the REST layer while the word-count app processes input.

    .venv/bin/python bench/query_latency.py --requests 500           (the 2026-11-21 run, 100 lines/s)
    .venv/bin/python bench/query_latency.py --rate 12000 --requests 500 --max-seconds 15
        --baseline-seconds 6                                         (full load, issue 14)
    .venv/bin/python bench/query_latency.py --rate 0 --requests 500  (no input)
    .venv/bin/python bench/query_latency.py --rate 12000 --paging-keys 100000 --requests 200
        --max-seconds 8 --baseline-seconds 8 --paging-seconds 20     (paging a 100,000-key store)
    .venv/bin/python bench/query_latency.py --requests 100           (a quick run)

Run each under `flock /tmp/bench.lock` on a shared machine.

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

Each scenario runs with two HTTP clients: `keep-alive` (one connection reused: what an
application does) and `new conn` (a connection per request). Both are `bench/raw_http.py`, whose
CPU per request is a small fraction of httpx's (`--client httpx` for the runs before 2026-11-26
evening), since the client's CPU comes out of the same 2 cores as the instances'. Each sends
at most `--requests` requests (after `--warmup` unmeasured ones) and stops after
`--max-seconds`; latency is from sending the request to having read the whole answer. Every
answer is checked (status 200, the right word, 1,000 entries in a range); others are counted
as errors and left out of the percentiles. The table also shows the records the instances
processed per second meanwhile (from their /metrics), which shows the app was busy.

Full load: a `--rate` above what the two instances process keeps a backlog, so they process as
fast as they can. Before each measurement (and once at the end) a baseline phase measures the
processed records/s with the feeder running and no queries, for `--baseline-seconds`; each
scenario's records/s is shown as a ratio to the mean of the baselines just before and after it
(so a drift of the processing rate over the run cancels out): the cost of the queries to
processing. `--rate 0` runs no feeder (the figures with no input).

`--interleave P` measures each scenario's baseline inside it instead: P seconds without queries,
P seconds with, repeated until `--max-seconds` of queries. The processing rate of the word count
swings by a factor of two to three over tens of seconds at full load (which of its two
sub-topologies the backlog feeds: a line counts as one record, its ten words as ten), so
baselines taken before and after a scenario can be far from the rate during it; interleaved
periods share the swings. The note gives the quartiles of the per-pair ratios. `--paced
100,50,10` adds a run of each scenario with keep-alive requests paced at that many a second
(local, proxied, range in that order): what a query load below the client's full speed costs.

`--paging-keys N` makes the vocabulary N words and adds a paging scenario: one client reads the
whole store through `all?limit=--page-size` of one instance (gathered from both), page by page
following `X-Next-After`, for at least `--paging-seconds` (whole passes; every pass is checked
to hold every word once, in key order), while a second client sends local gets (keep-alive)
concurrently; it reports pages/s, page latency, the gets' latency and the processing meanwhile.
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
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE  # noqa: E402
from bench.query_cost import FLOOR_BODY, FLOOR_URL, start_floor  # noqa: E402
from bench.query_measure import (  # noqa: E402
    RANGE_KEYS,
    Instance,
    Request,
    Result,
    answers,
    key_requests,
    measure,
    measure_paging,
    processed_per_second,
    range_requests,
    read_all_pages,
    start_instances,
    stop_instances,
    wait_for,
)
from streams_core.broker import LocalKafkaBroker  # noqa: E402

PARTITIONS = 4
_FEEDER_POOL = 20_000
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
        # Lines made in advance: the feeder's CPU is taken from the instances on this machine.
        pool = [" ".join(rnd.choices(vocabulary, k=words_per_line)).encode() for _ in range(_FEEDER_POOL)]
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            began = time.monotonic()
            count = 0
            while not stop.is_set():
                due = int((time.monotonic() - began) * rate) + 1
                while count < due:
                    await producer.send(INPUT_TOPIC, pool[count % _FEEDER_POOL])
                    count += 1
                sent.value = count
                await asyncio.sleep(0.01)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


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
    floor = start_floor() if args.floor else None
    stop = multiprocessing.Event()
    sent = multiprocessing.Value("q", 0)
    feeder = multiprocessing.Process(
        target=_feed, args=(bootstrap, vocabulary, args.words_per_line, args.rate, stop, sent), daemon=True
    )
    try:
        wait_for(lambda: all(answers(i.url + "/ready") for i in instances), 120, "both instances RUNNING", instances)
        first = instances[0]
        all_url = f"{first.url}/state/keyvalues/{STORE}/all"
        words = set(vocabulary)

        def counted() -> bool:
            with httpx.Client(timeout=60) as client:
                try:
                    return words <= set(read_all_pages(client, all_url, 10_000))
                except httpx.HTTPError:
                    return False

        wait_for(counted, 300, "every word counted", instances)
        owner_of: dict[str, Instance] = {}
        with httpx.Client(timeout=60) as client:
            for instance in instances:
                local_url = f"{instance.url}/state/keyvalues/{STORE}/all?scope=local"
                for key in read_all_pages(client, local_url, 10_000):
                    if key in words:  # (a used broker's TextLinesTopic may hold other words)
                        owner_of[key] = instance
        assert len(owner_of) == len(vocabulary), "every word has an owner"
        share = {i.name: sum(1 for o in owner_of.values() if o is i) for i in instances}
        print(f"word-count keys per instance: {share}", flush=True)

        def other(instance: Instance) -> Instance:
            return next(i for i in instances if i is not instance)

        baselines: list[float] = []
        feeding_since = time.perf_counter()

        def baseline() -> int:
            """Measure processing with no queries; the index of the figure (0 without a feeder)."""
            if args.rate > 0:
                rate, cpu = processed_per_second(instances, args.baseline_seconds)
                baselines.append(rate)
                print(f"  baseline (feeder, no queries): {rate:.0f} records/s, {cpu}", flush=True)
            return len(baselines) - 1

        if args.rate > 0:
            feeder.start()
            feeding_since = time.perf_counter()
            time.sleep(args.settle)
        results = []
        scenarios: list[tuple[str, Callable[[], Iterator[Request]]]] = [
            *([("bare HTTP", floor_requests)] if floor is not None else []),
            ("local get", lambda: key_requests(vocabulary, lambda w: owner_of[w], rnd)),
            ("proxied get", lambda: key_requests(vocabulary, lambda w: other(owner_of[w]), rnd)),
            (f"range {RANGE_KEYS}", lambda: range_requests(vocabulary, instances, rnd)),
        ]
        for scenario, requests in scenarios if args.full_speed else []:
            for client_kind in ("keep-alive", "new conn"):
                before = -1 if args.interleave > 0 else baseline()
                result = measure(
                    scenario, client_kind, requests(), count=args.requests, warmup=args.warmup,
                    max_seconds=args.max_seconds, instances=instances, http=args.client,
                    interleave=args.interleave,
                )  # fmt: skip
                result.baseline_index = before
                results.append(result)
                print(f"  {scenario:12} {client_kind:10} {len(result.latencies_ms)} answers in {result.seconds:.1f} s",
                      flush=True)  # fmt: skip
        for (scenario, requests), rate in zip(scenarios[1 if floor is not None else 0 :], args.paced, strict=False):
            before = -1 if args.interleave > 0 else baseline()
            result = measure(
                scenario, f"{rate:g}/s", requests(), count=args.requests, warmup=args.warmup,
                max_seconds=args.max_seconds, instances=instances, http=args.client, interleave=args.interleave, rate=rate,
            )  # fmt: skip
            result.baseline_index = before
            results.append(result)
            print(f"  {scenario:12} {rate:g}/s {len(result.latencies_ms)} answers in {result.seconds:.1f} s", flush=True)
        if args.paging_keys:
            before = baseline()
            local_gets = key_requests(vocabulary, lambda w: owner_of[w], rnd)
            paged = measure_paging(args, words, instances, local_gets)
            for result in paged:
                result.baseline_index = before
            results.extend(paged)
            print(f"  paging: {results[-2].note}", flush=True)
        if args.interleave <= 0 or args.paging_keys:
            baseline()
        fed = sent.value / (time.perf_counter() - feeding_since) if args.rate > 0 else 0.0
        stop.set()
        if feeder.is_alive():
            feeder.join(timeout=30)
        print_table(args, results, sent.value, fed, baselines)
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(timeout=10)
            if feeder.is_alive():
                feeder.kill()
        if floor is not None:
            floor.terminate()
            floor.wait(timeout=10)
        stop_instances(instances)


def floor_requests() -> Iterator[Request]:
    """GETs of the bare app: what a back-to-back client costs processing whatever the server does."""
    request = Request(FLOOR_URL, lambda response: bool(response.content == FLOOR_BODY))
    while True:
        yield request


def print_table(
    args: argparse.Namespace, results: list[Result], lines_sent: int, fed_per_s: float, baselines: list[float]
) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print()
    print(f"query latency, {now}; {machine()}")
    print(f"2 word-count instances + broker on this machine, loopback HTTP; feeder {args.rate:g} lines/s x "
          f"{args.words_per_line} words ({lines_sent} lines sent, {fed_per_s:.0f} lines/s = "
          f"{fed_per_s * (1 + args.words_per_line):.0f} records/s to process); {args.keys} distinct words; "
          f"--requests {args.requests} --max-seconds {args.max_seconds:g}; client {args.client}")  # fmt: skip
    if baselines:
        print("baselines (feeder, no queries, before each measurement and at the end): "
              + " / ".join(f"{b:.0f}" for b in baselines) + " records/s")  # fmt: skip
    with contextlib.suppress(OSError):
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    header = f"| {'query':12} | {'client':10} | {'answers':>7} | {'errors':>6} | {'p50 ms':>7} | {'p99 ms':>7} | " \
             f"{'max ms':>7} | {'mean ms':>7} | {'records/s processed':>19} | {'vs baseline':>11} | note |"  # fmt: skip
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for r in results:
        mean = statistics.fmean(r.latencies_ms) if r.latencies_ms else float("nan")
        top = max(r.latencies_ms) if r.latencies_ms else float("nan")
        print(f"| {r.scenario:12} | {r.client:10} | {len(r.latencies_ms):>7} | {r.errors:>6} | "
              f"{r.percentile(50):>7.1f} | {r.percentile(99):>7.1f} | {top:>7.1f} | {mean:>7.1f} | "
              f"{r.processed_per_s:>19.0f} | {r.processed_per_s / r.baseline(baselines):>11.2f} | {r.note} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="measured requests per scenario and client")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time limit of each scenario and client")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured requests before each measurement")
    parser.add_argument("--keys", type=int, default=2000, help=f"distinct words (at least {RANGE_KEYS})")
    parser.add_argument("--rate", type=float, default=100.0,
                        help="lines per second the feeder produces meanwhile (0: no feeder)")  # fmt: skip
    parser.add_argument("--baseline-seconds", type=float, default=5.0,
                        help="seconds of processing without queries measured before and after the queries")  # fmt: skip
    parser.add_argument("--interleave", type=float, default=0.0,
                        help="alternate quiet and query periods of this many seconds in each scenario, "
                             "its own baseline (0: a baseline phase before each scenario)")  # fmt: skip
    parser.add_argument("--paced", type=lambda text: [float(r) for r in text.split(",")], default=[],
                        help="also measure each scenario (local, proxied, range) with keep-alive requests paced at "
                             "these rates, e.g. 100,50,10 (per second)")  # fmt: skip
    parser.add_argument("--full-speed", action=argparse.BooleanOptionalAction, default=True,
                        help="measure each scenario with requests one right after the other (--no-full-speed: "
                             "only the --paced runs)")  # fmt: skip
    parser.add_argument("--paging-keys", type=int, default=0,
                        help="add the paging scenario over a store of this many words (0: none)")  # fmt: skip
    parser.add_argument("--page-size", type=int, default=1000, help="limit of each page in the paging scenario")
    parser.add_argument("--paging-seconds", type=float, default=10.0, help="least time the paging scenario runs")
    parser.add_argument("--floor", action="store_true",
                        help="first measure a bare HTTP server in a process of its own, back to back: "
                             "what the client and an answer that does nothing cost processing")  # fmt: skip
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of feeding before measuring")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="the measuring client: raw (bench/raw_http.py) or httpx (~0.8 ms of CPU a request)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    args.keys = max(args.keys, args.paging_keys)
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
