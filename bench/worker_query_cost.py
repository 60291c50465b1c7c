"""CPU that one REST query costs each process of an instance whose stream threads are worker processes.

    flock /tmp/bench.lock .venv/bin/python bench/worker_query_cost.py                  (2,000 requests a kind)
    flock /tmp/bench.lock .venv/bin/python bench/worker_query_cost.py --requests 300   (a quick run)

With `stream.threads.mode=process` the REST server runs in the instance's process and the stores
in the workers; a query costs the instance its HTTP and JSON work and the worker that holds the
key one request on its query channel. This starts a local broker and the real service
(`python -m app wordcount`, STREAMS_NUM_STREAM_THREADS=2, STREAMS_STREAM_THREADS_MODE=process),
fills the word count with `--keys` words over 4 partitions, and then, for each kind of query,
sends `--requests` keep-alive requests one at a time (bench/raw_http.py) and reads each process's
CPU time from /proc before and after. A process's idle CPU (heartbeats, polls, reports), measured
over an equally long quiet span just before, is subtracted:

  local get        GET /state/keyvalue/word-count/<w>: the instance's key route, one worker's get
  range, gathered  GET /state/keyvalues/word-count/all: both workers' copies merged (`--keys` keys)

The instance's figure is per request; a worker's is per request it served (a get reaches one
worker; the range reaches both).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE  # noqa: E402
from bench.raw_http import RawHttpClient  # noqa: E402
from bench.wordcount_guarantees import create_topics, fill  # noqa: E402
from streams_core.broker import LocalKafkaBroker  # noqa: E402

_TICK_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK_S


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(client: RawHttpClient, url: str, ok: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = client.get(url)
            if answer.status_code == 200 and (ok is None or ok(answer.json())):  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} not ready in {timeout} s")


def measure(client: RawHttpClient, url: str, pids: dict[str, int], requests: int) -> dict[str, float]:
    """CPU µs per request of each process, idle CPU over an equal quiet span subtracted."""
    began = time.perf_counter()
    for _ in range(requests):
        if client.get(url).status_code != 200:
            raise RuntimeError(f"{url} failed")
    wall = time.perf_counter() - began
    quiet = {name: cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(wall)
    idle = {name: cpu_seconds(pid) - quiet[name] for name, pid in pids.items()}
    busy = {name: cpu_seconds(pid) for name, pid in pids.items()}
    for _ in range(requests):
        client.get(url)
    return {name: (cpu_seconds(pid) - busy[name] - idle[name]) / requests * 1e6 for name, pid in pids.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-worker-query-") as root:
        broker = LocalKafkaBroker(Path(root) / "broker", port=0)
        broker.start()
        service: subprocess.Popen[bytes] | None = None
        try:
            bootstrap = broker.bootstrap_servers
            words = [f"w{i:04d}" for i in range(args.keys)]
            asyncio.run(create_topics(bootstrap, [INPUT_TOPIC, OUTPUT_TOPIC], 4))
            asyncio.run(fill(bootstrap, INPUT_TOPIC, [" ".join(words[i : i + 10]).encode() for i in range(0, len(words), 10)]))
            port = free_port()
            env = {**os.environ, "STREAMS_NUM_STREAM_THREADS": "2", "STREAMS_STREAM_THREADS_MODE": "process"}
            service = subprocess.Popen(
                [sys.executable, "-m", "app", "wordcount", "--bootstrap-servers", bootstrap,
                 "--application-server", f"127.0.0.1:{port}", "--state-dir", str(Path(root) / "state")],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            with RawHttpClient() as client:
                wait_for(client, f"{base}/ready", None, 90)
                wait_for(client, f"{base}/state/keyvalues/{STORE}/all", lambda body: len(body) == args.keys, 60)
                workers = children(service.pid)
                pids = {"instance": service.pid, **{f"worker {i + 1}": pid for i, pid in enumerate(workers)}}
                kinds = [("local get", f"{base}/state/keyvalue/{STORE}/{words[7]}"),
                         (f"range, gathered ({args.keys} keys)", f"{base}/state/keyvalues/{STORE}/all")]
                for _, url in kinds:  # warm-up
                    for _ in range(200):
                        client.get(url)
                print(f"CPU µs per request, {args.requests} keep-alive requests each, one at a time; "
                      f"{len(workers)} workers; load average {os.getloadavg()[0]:.2f}")
                print("| query | " + " | ".join(pids) + " |")
                print("|---|" + "---:|" * len(pids))
                for name, url in kinds:
                    cost = measure(client, url, pids, args.requests)
                    print(f"| {name} | " + " | ".join(f"{cost[p]:.0f}" for p in pids) + " |", flush=True)
        finally:
            if service is not None:
                service.terminate()
                service.wait(timeout=60)
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
