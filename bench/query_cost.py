"""CPU that one REST query costs the instances, by kind of query, as a ratio to a bare HTTP server.

    flock /tmp/bench.lock .venv/bin/python bench/query_cost.py                 (3,000 requests a kind)
    flock /tmp/bench.lock .venv/bin/python bench/query_cost.py --requests 500  (a quick run)

Queries share the event loop, and the cores, with the stream threads, so what a query costs in
CPU is taken from processing (bench/query_latency.py measures that under load). This measures the
cost alone, without a broker: one child process serves the REST layer's two-instance test cluster
(tests/api/fakes.py: instances A and B on 127.0.0.1:7001 and :7002, real stores, real discovery,
real HTTP between them, through `api.serve`); another serves a bare ASGI app that answers a fixed
JSON body with the same uvicorn settings (`api.server.serve_asgi`): the floor, what the HTTP server
alone costs. One keep-alive client (bench/raw_http.py) in this process sends the requests one at
a time; the figure is the serving process's CPU time (user + system, from /proc) per request:

  floor           GET of the bare app
  local get       GET /state/keyvalue/counts/<w> asked of A, which owns <w> (the key-get dispatcher
                  straight into the route's function, through the asynchronous store path)
  local via app   the same with `?stale=false`, which takes FastAPI's route (the same answer)
  proxied get     asked of A for a <w> that B owns: A forwards it, B answers; both in the process
  range, gathered GET /state/keyvalues/counts/all of A: A's part and B's, merged (`--keys` keys)

`--without fast-path,peer-transport,httptools` serves without the REST layer's three CPU savers
(docs/rest-api.md, "What a query costs"): the key-get dispatcher (every get through FastAPI), the
lean peer transport (httpx's own `AsyncHTTPTransport` forwards), httptools (uvicorn's h11
protocol, the floor's too): what each still saves, measured against a run with all three.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.raw_http import RawHttpClient  # noqa: E402

FLOOR_PORT = 7011
FLOOR_URL = f"http://127.0.0.1:{FLOOR_PORT}/"
FLOOR_BODY = b'{"key":"word","value":5}'


WITHOUT = ("fast-path", "peer-transport", "httptools")


def _leave_out(without: list[str]) -> None:
    """Serve as if the REST layer had not the named savers (this process only)."""
    import api.app
    import api.server

    if "httptools" in without:
        api.server.StreamsHttpProtocol = "h11"  # type: ignore[assignment,misc]
    if "fast-path" in without:

        class Through:
            def __init__(self, app: Any, **_: Any) -> None:
                self.app = app

            async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
                await self.app(scope, receive, send)

        api.app.KeyGetFastPath = Through  # type: ignore[assignment,misc]


def _serve_floor(without: list[str]) -> None:
    from api.server import bind, serve_asgi

    _leave_out(without)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(FLOOR_BODY)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": FLOOR_BODY})

    async def main() -> None:
        await serve_asgi(app, bind("127.0.0.1", FLOOR_PORT))
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def start_floor(without: list[str]) -> subprocess.Popen[bytes]:
    """The floor's bare app in a process of its own (this script, `--serve floor`), once it listens."""
    floor = subprocess.Popen([sys.executable, __file__, "--serve", "floor", *_without_args(without)],
                             stdout=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    assert floor.stdout is not None
    floor.stdout.readline()
    return floor


def _without_args(without: list[str]) -> list[str]:
    return ["--without", ",".join(without)] if without else []


def _serve_cluster(keys: int, without: list[str]) -> None:
    import httpx

    from api import serve
    from api.settings import ApiSettings
    from tests.api.fakes import COUNTS, HOST_A, HOST_B, Cluster

    _leave_out(without)

    async def main() -> None:
        transport = httpx.AsyncHTTPTransport() if "peer-transport" in without else None
        cluster = Cluster(ApiSettings(transport=transport))
        for i in range(keys):
            cluster.put(COUNTS, f"word{i:05d}", i)
        async with cluster.running():
            for host in (HOST_A, HOST_B):
                await serve(cluster.instances[host], host.host, host.port)
            owners = {
                host: [f"word{i:05d}" for i in range(keys) if cluster.owner_host(f"word{i:05d}") == host]
                for host in (HOST_A, HOST_B)
            }
            print("ready", owners[HOST_A][0], owners[HOST_B][0], flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(pid: int, url: str, requests: int, warmup: int) -> tuple[float, float]:
    """Server CPU µs and wall ms per request, after checking the answer is a 200."""
    with RawHttpClient() as client:
        for _ in range(warmup):
            answer = client.get(url)
            if answer.status_code != 200:
                raise RuntimeError(f"{url}: {answer.status_code} {answer.content[:200]!r}")
        cpu, began = _cpu_seconds(pid), time.perf_counter()
        for _ in range(requests):
            client.get(url)
        wall = time.perf_counter() - began
        return (_cpu_seconds(pid) - cpu) / requests * 1e6, wall / requests * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--keys", type=int, default=100, help="keys of the store (the gathered range answers all)")
    parser.add_argument("--without", type=lambda text: [w for w in text.split(",") if w], default=[],
                        help=f"serve without these, comma-separated: {', '.join(WITHOUT)}")  # fmt: skip
    parser.add_argument("--serve", choices=("floor", "cluster"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if unknown := set(args.without) - set(WITHOUT):
        parser.error(f"--without: unknown {', '.join(sorted(unknown))}; choose from {', '.join(WITHOUT)}")
    if args.serve == "floor":
        _serve_floor(args.without)
        return 0
    if args.serve == "cluster":
        _serve_cluster(args.keys, args.without)
        return 0
    floor = start_floor(args.without)
    cluster = subprocess.Popen(
        [sys.executable, __file__, "--keys", str(args.keys), "--serve", "cluster", *_without_args(args.without)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert cluster.stdout is not None
        _, local, remote = cluster.stdout.readline().decode().split()
        a = "http://127.0.0.1:7001"
        kinds = [
            ("floor", floor.pid, FLOOR_URL),
            ("local get", cluster.pid, f"{a}/state/keyvalue/counts/{local}"),
            ("local via app", cluster.pid, f"{a}/state/keyvalue/counts/{local}?stale=false"),
            ("proxied get", cluster.pid, f"{a}/state/keyvalue/counts/{remote}"),
            (f"range, gathered ({args.keys} keys)", cluster.pid, f"{a}/state/keyvalues/counts/all"),
        ]
        print(f"server CPU per request, {args.requests} keep-alive requests each, one at a time; "
              f"without: {', '.join(args.without) or 'nothing'}")  # fmt: skip
        print("| query | CPU µs / request | x floor | wall ms / request |")
        print("|---|---:|---:|---:|")
        floor_us = 0.0
        for name, pid, url in kinds:
            cpu_us, wall_ms = _measure(pid, url, args.requests, args.warmup)
            floor_us = floor_us or cpu_us
            print(f"| {name} | {cpu_us:.0f} | {cpu_us / floor_us:.2f} | {wall_ms:.2f} |", flush=True)
    finally:
        for process in (floor, cluster):
            process.terminate()
            process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
