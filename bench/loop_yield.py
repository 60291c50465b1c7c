"""How long a query waits behind a busy coroutine on the same event loop, by how it yields.

A FastAPI app under uvicorn shares its loop with a coroutine that burns `--step-ms` of CPU per
step and then yields with `--yields` consecutive `asyncio.sleep(0)` (the stream thread's
`_let_others_run` uses 3). A client in another process sends sequential keep-alive gets and
reports p50 / p99 / max latency, then the busy coroutine's steps per second (its throughput).

    .venv/bin/python bench/loop_yield.py --yields 1,2,3,4 --step-ms 4
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time

import httpx
import uvicorn
from fastapi import Depends, FastAPI, Request

app = FastAPI()


async def _dependency(request: Request) -> int:
    return 1


@app.get("/k/{key}")
async def _get(key: str, extra: int = Depends(_dependency)) -> dict[str, object]:
    return {"key": key, "value": extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(port: int, requests: int) -> None:
    latencies = []
    with httpx.Client() as http:
        for i in range(requests):
            started = time.perf_counter()
            http.get(f"http://127.0.0.1:{port}/k/{i}").raise_for_status()
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    print(f"{latencies[len(latencies) // 2]:.1f} {latencies[int(len(latencies) * 0.99) - 1]:.1f} {latencies[-1]:.1f}")


async def measure(yields: int, step_s: float, requests: int) -> str:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", loop="asyncio"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    steps = 0

    async def busy() -> None:
        nonlocal steps
        while True:
            end = time.perf_counter() + step_s
            while time.perf_counter() < end:
                pass
            steps += 1
            for _ in range(yields):
                await asyncio.sleep(0)

    worker = asyncio.create_task(busy())
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", str(port), "--requests", str(requests), stdout=subprocess.PIPE
    )
    out, _ = await proc.communicate()
    elapsed = time.perf_counter() - started
    worker.cancel()
    server.should_exit = True
    await serving
    p50, p99, top = out.decode().split()
    return f"| {yields} | {step_s * 1000:.0f} | {p50} | {p99} | {top} | {steps / elapsed:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--yields", default="1,3", help="comma-separated counts of sleep(0) per yield")
    parser.add_argument("--step-ms", type=float, default=4.0)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--client", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.requests)
        return
    print("| yields | step ms | p50 ms | p99 ms | max ms | busy steps/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for yields in (int(y) for y in args.yields.split(",")):
        print(asyncio.run(measure(yields, args.step_ms / 1000, args.requests)), flush=True)


if __name__ == "__main__":
    main()
