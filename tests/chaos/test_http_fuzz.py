"""HTTP fuzzing of a running two-instance word count on the real broker (issue 15, item 3).

Two `python -m app wordcount` processes (the real service, uvicorn on its own 127.0.0.1 port)
count a known text; then:

- Schemathesis draws requests from `openapi.yaml` (schema-valid and schema-invalid ones, for
  every operation, steered towards the real stores, words and instances) and sends them over
  HTTP to either instance; every answer must keep the contract of `tests/api/conformance.py`
  (a documented status and schema, no 5xx but a 503 with `Retry-After`) and pass Schemathesis'
  own response checks (a schema-valid request is not refused, a schema-invalid one is);
- targeted raw requests (oversized paths, keys and queries, unicode, invalid UTF-8 and double
  percent-encodings, `..` and `%2e%2e`, NUL, `#`, bogus `position`, `timeoutMs`, `limit`,
  `after`, `maxLag`, window bounds) get a clean answer: the right value for a key that exists
  (through the instance that forwards it too), else a 4xx with a JSON `error`;
- paging through `all` with `limit=1` follows `X-Next-After` over every key, whatever its bytes;
- afterwards both processes are alive and answer `/health` and a known word right, in time;
- the service listens on 127.0.0.1 only, as configured (item 4).

FUZZ_EXAMPLES (environment) sets the number of fuzzed requests (default 1500, about 25 s;
12,000 took 170 s).
A failure prints Hypothesis' `@seed(...)` and a curl line that reproduces it.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

pytest.importorskip("yaml", reason="needs PyYAML (dev extra: pyyaml)")
schemathesis = pytest.importorskip("schemathesis", reason="needs Schemathesis (dev extra: schemathesis)")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, STORE, WINDOWED_STORE  # noqa: E402
from tests.api.conformance import check  # noqa: E402
from tests.api.contract import CONTRACT  # noqa: E402
from tests.chaos.http_raw import RawAnswer, listening, raw_get  # noqa: E402
from tests.integration.rest_cluster import Instance, WordCountCluster, make_text, wait_until  # noqa: E402
from tests.kafka_utils import Rec, create_topic, produce  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.chaos]

PARTITIONS = 4
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1500"))
TIMEOUT_S = 40.0
"""Longest wait for any one answer (a `position` bound may wait 30 s): longer counts as wedging the server."""


@dataclass
class Fuzzed:
    """The running application and what it was fed: `truth` counts every word of this test."""

    cluster: WordCountCluster
    truth: Counter[str]
    odd: dict[str, str]
    """Words of the text that are hard on a URL, by what makes them so."""
    wrong: str = ""
    """The last wrong answer `_all_right` saw."""

    @property
    def instances(self) -> list[Instance]:
        return self.cluster.live()


def _odd_words(tag: str) -> dict[str, str]:
    """Words that stress paths and headers; the dot words are bare (no other test writes them)."""
    return {
        "dots": "..",
        "dot": ".",
        "nul": f"nul\x00{tag}",
        "hash": f"hash#{tag}",
        "percent": f"100%{tag}",
        "plus": f"a+b{tag}",
        "unicode": f"日本語{tag}",
        "emoji": f"\U0001f600{tag}",
        "latin1": f"naïve{tag}",
        "control": f"bell\x07{tag}",
        "quote": f"'\"<{tag}>",
    }


@pytest.fixture(scope="module")
async def fuzzed(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Fuzzed]:
    tag = uuid.uuid4().hex[:8]
    await create_topic(bootstrap_servers, INPUT_TOPIC, PARTITIONS)
    await create_topic(bootstrap_servers, OUTPUT_TOPIC, PARTITIONS)
    lines, truth = make_text(random.Random(tag), words=30, lines=40, suffix=f"-{tag}")
    odd = _odd_words(tag)
    lines.append(" ".join(odd.values()))
    truth.update(odd.values())
    await produce(bootstrap_servers, INPUT_TOPIC, [Rec(f"{tag}-{n}".encode(), line.encode()) for n, line in enumerate(lines)])
    cluster = WordCountCluster(bootstrap_servers, tmp_path_factory.mktemp("fuzz"), f"http-fuzz-{tag}")
    try:
        await asyncio.gather(cluster.start_process("a"), cluster.start_process("b"))
        await cluster.wait_running(timeout=90)
        found = Fuzzed(cluster, truth, odd)
        await wait_until(lambda: _all_right(found), 60, lambda: f"every word counted through both instances: {found.wrong}")
        yield found
    finally:
        await cluster.close()


def _segment(text: str) -> str:
    """`text` as one URL path segment; dot segments encoded, as a URL client would otherwise resolve them."""
    segment = quote(text, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def _path(word: str) -> str:
    return f"/state/keyvalue/{STORE}/{_segment(word)}"


async def _all_right(fuzzed: Fuzzed, words: list[str] | None = None) -> bool:
    """Every word (or `words`) answers its count through every instance; else `fuzzed.wrong` says where not."""
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        for instance in fuzzed.instances:
            for word in words or list(fuzzed.truth):
                answer = await http.get(instance.url + _path(word))
                if answer.status_code != 200 or answer.json()["value"] < fuzzed.truth[word]:
                    fuzzed.wrong = f"{word!r} through {instance.name}: {answer.status_code} {answer.text[:200]}"
                    return False
    return True


# -- raw requests ------------------------------------------------------------------------------


async def _raw(instance: Instance, target: bytes) -> RawAnswer:
    return await raw_get(instance.port, target, timeout=TIMEOUT_S)


KEY = f"/state/keyvalue/{STORE}/"
ALL = f"/state/keyvalues/{STORE}/all"
WINDOWED = f"/state/windowed/{WINDOWED_STORE}/"
LONG = b"a" * 100_000

BAD_REQUESTS: dict[str, tuple[str, bytes, int]] = {
    # name: (route template, raw target, status)
    "key of 100 kB": ("/state/keyvalue/{store}/{key}", KEY.encode() + LONG, 414),
    "key of 100 kB, percent-encoded": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%C3%A9" * 17_000, 414),
    "path of 100 kB": ("/state/keyvalue/{store}/{key}", b"/state/" + b"x/" * 50_000, 414),
    "query of 100 kB": ("/state/keyvalues/{store}/all", ALL.encode() + b"?after=" + LONG, 414),
    "3000 query parameters": ("/health", b"/health?" + b"&".join(b"p%d=1" % i for i in range(3000)), 414),
    "invalid UTF-8 key": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%ff", 400),
    "overlong UTF-8 key": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%c0%af", 400),
    "surrogate key": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%ed%a0%80", 400),
    "invalid UTF-8 store": ("/state/keyvalue/{store}/{key}", b"/state/keyvalue/%fe%ff/x", 400),
    "invalid UTF-8 after": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=2&after=%ff", 400),
    "invalid UTF-8 position": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=%fe", 400),
    "invalid UTF-8 on /health": ("/health", b"/health?x=%80", 400),
    "empty position": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=", 400),
    "position of words": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=hello", 400),
    "position, offset of 20 digits": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=t:0:" + b"9" * 20, 400),
    "position, negative partition": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=t:-1:5", 400),
    "position, trailing comma": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?position=t:0:5,", 400),
    "timeoutMs negative": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?timeoutMs=-1", 400),
    "timeoutMs too big": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?timeoutMs=30001", 400),
    "timeoutMs of 30 digits": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?timeoutMs=" + b"9" * 30, 400),
    "timeoutMs not an integer": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?timeoutMs=1e3", 400),
    "maxLag negative": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?maxLag=-1", 400),
    "maxLag NaN": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?maxLag=NaN", 400),
    "stale maybe": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"x?stale=maybe", 400),
    "limit 0": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=0", 400),
    "limit negative": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=-5", 400),
    "limit too big": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=100001", 400),
    "limit 2^64": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=18446744073709551616", 400),
    "limit text": ("/state/keyvalues/{store}/all", ALL.encode() + b"?limit=ten", 400),
    "scope bogus": ("/state/keyvalues/{store}/all", ALL.encode() + b"?scope=everything", 400),
    "window from negative": ("/state/windowed/{store}/{key}/{from}/{to}", WINDOWED.encode() + b"x/-1/5", 400),
    "window to 2^63": ("/state/windowed/{store}/{key}/{from}/{to}", WINDOWED.encode() + b"x/0/9223372036854775808", 400),
    "window from text": ("/state/windowed/{store}/{key}/{from}/{to}", WINDOWED.encode() + b"x/yesterday/5", 400),
    "unknown store, odd bytes": ("/state/keyvalue/{store}/{key}", b"/state/keyvalue/%00%01%2e%2e/x", 404),
    "absent key, double-encoded dots": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%252e%252e-absent", 404),
    "absent key of 10 kB": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"b" * 10_000, 404),
    "absent key of 9 kB, percent-encoded": ("/state/keyvalue/{store}/{key}", KEY.encode() + b"%C3%A9" * 1500, 404),
}
"""Requests that must get a clean 4xx with a JSON `error` from either instance."""

NO_ROUTE: dict[str, bytes] = {
    "dot segments out of a key": KEY.encode() + b"../../health",
    "encoded slash in a key": KEY.encode() + b"a%2Fb",
    "double slash": b"//127.0.0.1:1/state/instances",
    "asterisk": b"*",
}
"""Targets that match no route: a JSON 404, never the answer of another route (no normalisation)."""


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
async def test_a_bad_request_gets_a_clean_4xx_with_a_json_reason(fuzzed: Fuzzed, name: str) -> None:
    template, target, status = BAD_REQUESTS[name]
    for instance in fuzzed.instances:
        answer = await _raw(instance, target)
        assert answer.status == status, f"{name} through {instance.name}: {answer.status} {answer.body[:300]!r}"
        check("GET", template, answer.status, answer.headers, answer.body)
        assert "error" in httpx.Response(status, content=answer.body).json()


@pytest.mark.parametrize("name", list(NO_ROUTE))
async def test_a_target_outside_the_routes_is_a_json_404(fuzzed: Fuzzed, name: str) -> None:
    for instance in fuzzed.instances:
        answer = await _raw(instance, NO_ROUTE[name])
        assert answer.status == 404 and answer.headers["content-type"] == "application/json", answer
        assert httpx.Response(404, content=answer.body).json() == {"error": "Not Found"}


async def test_odd_words_answer_their_count_through_both_instances(fuzzed: Fuzzed) -> None:
    """`..`, `.`, NUL, `#`, `%`, `+`, unicode: the right count, here or forwarded to the owner."""
    targets = {word: [_path(word).encode()] for word in fuzzed.odd.values()}
    targets[".."].append(KEY.encode() + b"%2e%2e")
    targets["."].append(KEY.encode() + b"%2E")
    targets[fuzzed.odd["hash"]].append(KEY.encode() + fuzzed.odd["hash"].encode())  # a raw '#', as sent by hand
    served_by = set()
    for word, paths in targets.items():
        for target in paths:
            for instance in fuzzed.instances:
                answer = await _raw(instance, target)
                assert answer.status == 200, f"{word!r} at {target[:80]!r} through {instance.name}: {answer}"
                body = httpx.Response(200, content=answer.body).json()
                assert body["key"] == word and body["value"] >= fuzzed.truth[word], (word, body)
                check("GET", "/state/keyvalue/{store}/{key}", answer.status, answer.headers, answer.body)
                served_by.add((instance.server, answer.headers["x-served-by"]))
    assert any(here != there for here, there in served_by), f"no odd word was forwarded: {served_by}"


async def test_paging_follows_x_next_after_over_every_key(fuzzed: Fuzzed) -> None:
    """`limit=1` pages, each cursor percent-decoded and passed back: every key once, in order."""
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        for instance in fuzzed.instances:
            whole = (await http.get(instance.url + ALL)).json()
            keys: list[str] = []
            params = {"limit": "7"}
            while True:
                answer = await http.get(instance.url + ALL, params=params)
                assert answer.status_code == 200, answer.text
                keys += [entry["key"] for entry in answer.json()]
                cursor = answer.headers.get("x-next-after")
                if cursor is None:
                    break
                assert cursor.isascii() and cursor.isprintable(), cursor
                assert unquote(cursor) == keys[-1]
                params = {"limit": "7", "after": unquote(cursor)}
            assert keys == [entry["key"] for entry in whole]
            assert set(fuzzed.odd.values()) <= set(keys)


def test_the_service_listens_on_127_0_0_1_only(fuzzed: Fuzzed) -> None:
    """`--application-server 127.0.0.1:P` binds 127.0.0.1:P and nothing else (no 0.0.0.0, no IPv6)."""
    for instance in fuzzed.instances:
        assert instance.process is not None
        assert listening(instance.process.pid, instance.port) == {"127.0.0.1"}


# -- fuzzing -----------------------------------------------------------------------------------


def _strategies() -> list[Any]:
    schema = schemathesis.openapi.from_path(str(CONTRACT))
    operations = [result.ok() for result in schema.get_all_operations()]
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    return [operation.as_strategy(generation_mode=mode) for operation in operations for mode in modes]


@st.composite
def _cases(draw: st.DrawFn, strategies: list[Any], fuzzed: Fuzzed) -> Any:
    """A case of any operation; mostly of a real store, often of a real word or instance.

    Path parameters set here go in percent-encoded: Schemathesis reads a `%` in them as an escape.
    """
    case = draw(st.one_of(strategies))
    parameters = case.path_parameters
    if "store" in parameters and draw(st.integers(0, 9)) < 8:
        parameters["store"] = draw(st.sampled_from([STORE, WINDOWED_STORE]))
    if "key" in parameters and draw(st.booleans()):
        parameters["key"] = _segment(draw(st.sampled_from(sorted(fuzzed.truth))))
    waits = case.query.get("timeoutMs") if isinstance(case.query, dict) else None
    if isinstance(waits, int) and 0 <= waits <= 30_000:  # keep `position` waits short (the run stays bounded)
        case.query["timeoutMs"] = waits % 500
    if "instance" in parameters and draw(st.booleans()):
        parameters["instance"] = _segment(draw(st.sampled_from([i.server for i in fuzzed.instances])))
    return case


@pytest.mark.slow
def test_fuzzed_requests_keep_the_contract_and_the_servers_alive(fuzzed: Fuzzed) -> None:
    statuses: Counter[tuple[str, int]] = Counter()
    instances = fuzzed.instances
    started = time.monotonic()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_cases(_strategies(), fuzzed), which=st.sampled_from(instances))
    def fuzz(case: Any, which: Instance) -> None:
        response = case.call(base_url=which.url, timeout=TIMEOUT_S)
        statuses[(case.operation.label, response.status_code)] += 1
        headers = {name.lower(): values[0] for name, values in response.headers.items()}
        check(case.method, case.operation.path, response.status_code, headers, response.content)
        # Schemathesis' checks besides (5xx is judged above: a 503 with Retry-After is documented).
        case.validate_response(response, excluded_checks=[not_a_server_error])

    fuzz()
    elapsed = time.monotonic() - started
    print(f"{sum(statuses.values())} fuzzed requests in {elapsed:.1f} s:")
    for (operation, status), count in sorted(statuses.items()):
        print(f"  {operation} -> {status}: {count}")
    assert sum(statuses.values()) >= EXAMPLES // 2
    asyncio.run(_still_serving(fuzzed))


async def _still_serving(fuzzed: Fuzzed) -> None:
    """Both processes alive, `/health` UP and known words right through each, within the timeout."""
    words = [fuzzed.odd["unicode"], fuzzed.odd["dots"], *sorted(fuzzed.truth)[:3]]
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        for instance in fuzzed.instances:
            assert instance.process is not None and instance.process.poll() is None, instance.log_tail()
            health = await http.get(instance.url + "/health")
            assert health.status_code == 200 and health.json()["status"] == "UP"
    assert await _all_right(fuzzed, words), "a known word no longer answers right after the fuzzing"
