"""Requests made from openapi.yaml and the check of their answers (what Schemathesis does).

`samples` gives each parameter valid values first (the cluster's stores and the keys of the
chosen store), then near misses and odd text; `sweep` varies one parameter at a time around
a valid request for every store; `check` holds an answer to the contract: documented status,
no 5xx other than a 503 with `Retry-After`, documented content type, body of the documented
schema. Needs PyYAML (the contract is read at import).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from tests.api.conftest import NUMBERS, WORDS
from tests.api.contract import conforms, load_contract, resolve
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, SESSIONS, WINDOWED, Cluster

SPEC = load_contract()
OPERATIONS = [(method.upper(), path) for path, item in SPEC["paths"].items() for method in item]
OPERATION_IDS = [f"{method} {path}" for method, path in OPERATIONS]
STORES = [COUNTS, IDS, WINDOWED, SESSIONS, "nope"]
ODD_TEXT = ["", " ", "%", "..", ".", "a/b", "é\u0000", "\U0001f600"]
WORD_KEYS = [*WORDS, "kiwi", "NaN", '{"a":1}', *ODD_TEXT]
LONG_KEYS = [*map(str, NUMBERS), "-0", "1.5", "1e3", "ten", str(2**63 - 1), str(2**63), str(-(2**63) - 1), *ODD_TEXT]

Request = tuple[str, dict[str, str], dict[str, str]]


def parameters(method: str, template: str) -> list[dict[str, Any]]:
    """The operation's parameters, `store` first (the values of keys depend on it)."""
    operation = SPEC["paths"][template][method.lower()]
    found = [resolve(SPEC, p) for p in operation.get("parameters", [])]
    return sorted(found, key=lambda p: p["name"] != "store")


def samples(parameter: dict[str, Any], store: str) -> list[str]:
    """Values of a parameter: valid ones first (for `store`), then near misses and odd text."""
    schema = parameter.get("schema", {})
    schema = next((s for s in schema.get("anyOf", []) if s.get("type") != "null"), schema)
    if parameter["name"] == "store":
        return STORES
    if "enum" in schema:
        return [*map(str, schema["enum"]), "bogus", ""]
    if schema.get("type") == "boolean":
        return ["true", "false", "maybe"]
    if schema.get("type") == "integer":
        low, high = schema.get("minimum", 0), schema.get("maximum", 2**63 - 1)
        return [str(low), "60000", str(high), str(low - 1), str(high + 1), "1.5", "x"]
    if parameter["in"] == "header":
        return [str(HOST_B), "anything"]
    return LONG_KEYS if store == IDS else WORD_KEYS


def build(template: str, path_values: dict[str, str], query: dict[str, str], headers: dict[str, str]) -> Request:
    path = template
    for name, value in path_values.items():
        path = path.replace(f"{{{name}}}", quote(value, safe=""))
    return path, query, headers


def sweep(method: str, template: str) -> Iterator[Request]:
    """For each store, a valid request, then each other parameter varied over its samples."""
    params = parameters(method, template)
    has_store = bool(params) and params[0]["name"] == "store"
    for store in STORES if has_store else [""]:
        base = {p["name"]: samples(p, store)[0] for p in params if p["in"] == "path"}
        if has_store:
            base["store"] = store
        yield build(template, base, {}, {})
        for parameter in params[1:] if has_store else params:
            name, place = parameter["name"], parameter["in"]
            for value in samples(parameter, store):
                if place == "path":
                    yield build(template, {**base, name: value}, {}, {})
                else:
                    query, headers = ({name: value}, {}) if place == "query" else ({}, {name: value})
                    yield build(template, base, query, headers)


def check(method: str, template: str, status: int, headers: Any, body: bytes) -> None:
    """The answer is documented, not a 5xx other than 503 with Retry-After, and conforms to its schema."""
    documented = SPEC["paths"][template][method.lower()]["responses"]
    where = f"{method} {template} -> {status}"
    assert str(status) in documented, f"{where}: status not in openapi.yaml ({sorted(documented)}): {body[:200]!r}"
    assert status < 500 or (status == 503 and "retry-after" in headers), f"{where}: {body[:300]!r}"
    response = resolve(SPEC, documented[str(status)])
    media = headers.get("content-type", "").split(";")[0]
    assert media in response.get("content", {}), f"{where}: undocumented content type {media!r}"
    if media == "application/json":
        problems = conforms(SPEC, response["content"][media]["schema"], json.loads(body))
        assert not problems, f"{where}: {problems}"


def send(cluster: Cluster, runner: asyncio.Runner, method: str, request: Request) -> Any:
    """Send one request to instance A on the cluster's loop; the httpx response."""
    path, query, headers = request

    async def call() -> Any:
        async with cluster.client(HOST_A) as client:
            return await client.request(method, path, params=query, headers=headers)

    return runner.run(call())
