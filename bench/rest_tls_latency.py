"""A local key get over HTTPS with mutual TLS and a token, against plain HTTP (issue 36).

    flock /tmp/bench.lock .venv/bin/python bench/rest_tls_latency.py --requests 2000 --rounds 3

One in-process instance (the API tests' fake `KafkaStreams` with a key-value store holding one
key) serves `GET /state/keyvalue/<store>/<key>` on 127.0.0.1; the client (httpx, in the same
process and loop) asks it one request at a time. The two servers alternate, round by round
(plain, secured, plain, secured...), each round with `--warmup` unmeasured requests first:

  keep-alive   one connection reused (what an application or a forwarding peer does): the TLS
               handshake is paid once, the per-request cost is encryption and the token check
  new conn     a connection per request: every request pays the TCP and TLS handshakes (mTLS:
               the client's certificate too)

It prints p50 and p99 per round and the median over the rounds of each, and the ratio
secured / plain. The certificates come from `tests/api/secured.py` (trustme); the secured server
requires a client certificate and a Bearer token mapped to a principal.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from api import ApiSettings, Credentials, serve
from streams_core.runtime.assignment import StreamsMetadataState
from tests.api.fakes import COUNTS, FakeKafkaStreams
from tests.api.secured import CLIENT_TOKEN, ENTRIES, Pki

KEY = "apple"


async def one_round(settings: ApiSettings, client: dict[str, Any], scheme: str, requests: int, warmup: int, reuse: bool) -> list[float]:
    """Seconds per request of one round against a fresh server."""
    streams = FakeKafkaStreams(None, {0, 1}, StreamsMetadataState({}, None))
    streams.active_driver.get_key_value_store(COUNTS).put(KEY, 5)
    handle = await serve(streams, "127.0.0.1", 0, settings=settings)
    url = f"{scheme}://127.0.0.1:{handle.port}/state/keyvalue/{COUNTS}/{KEY}"
    limits = httpx.Limits(max_keepalive_connections=1 if reuse else 0)
    times: list[float] = []
    try:
        async with httpx.AsyncClient(limits=limits, **client) as http:
            for i in range(warmup + requests):
                began = time.perf_counter()
                answer = await http.get(url)
                spent = time.perf_counter() - began
                if answer.status_code != 200 or answer.json()["value"] != 5:
                    raise SystemExit(f"wrong answer {answer.status_code}: {answer.text}")
                if i >= warmup:
                    times.append(spent)
    finally:
        await handle.stop()
        streams.close()
    return times


def quantiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.99)] * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pki = Pki(Path(tempfile.mkdtemp(prefix="rest-tls-bench-")))
    context = ssl.create_default_context(cafile=str(pki.cafile))
    context.load_cert_chain(*pki.client_cert())
    sides = {
        "plain HTTP": (ApiSettings(), {}, "http"),
        "HTTPS+mTLS+token": (
            ApiSettings(tls=pki.tls(), credentials=Credentials.from_mapping(ENTRIES)),
            {"verify": context, "headers": {"Authorization": f"Bearer {CLIENT_TOKEN}"}},
            "https",
        ),
    }
    for mode, reuse, requests in (("keep-alive", True, args.requests), ("new conn", False, max(args.requests // 4, 100))):
        medians: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for round_no in range(args.rounds):
            for side, (settings, client, scheme) in sides.items():
                p50, p99 = quantiles(await one_round(settings, client, scheme, requests, args.warmup // 4 if not reuse else args.warmup, reuse))
                medians[side].append((p50, p99))
                print(f"{mode:10} round {round_no + 1} {side:17} p50 {p50:.3f} ms  p99 {p99:.3f} ms", flush=True)
        summary = {side: (statistics.median(p for p, _ in runs), statistics.median(q for _, q in runs)) for side, runs in medians.items()}
        (plain50, plain99), (sec50, sec99) = summary["plain HTTP"], summary["HTTPS+mTLS+token"]
        print(
            f"{mode:10} median of rounds: plain p50 {plain50:.3f} p99 {plain99:.3f} ms; "
            f"secured p50 {sec50:.3f} p99 {sec99:.3f} ms; ratio p50 {sec50 / plain50:.2f}x p99 {sec99 / plain99:.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
