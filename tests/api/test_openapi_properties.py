"""The property test: Hypothesis draws requests from openapi.yaml, the answers must keep the contract."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (dev extra: pyyaml)")
pytest.importorskip("hypothesis", reason="needs Hypothesis (dev extra: hypothesis)")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conformance import (
    OPERATION_IDS,
    OPERATIONS,
    Request,
    build,
    check,
    parameters,
    samples,
    send,
)
from tests.api.fakes import Cluster


@st.composite
def requests(draw: st.DrawFn, method: str, template: str) -> Request:
    """A request whose parameters are samples of their schemas or arbitrary text."""
    path_values: dict[str, str] = {}
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    store = ""
    for parameter in parameters(method, template):
        name, place = parameter["name"], parameter["in"]
        value = draw(st.one_of(st.sampled_from(samples(parameter, store)), st.text(max_size=12)))
        store = value if name == "store" else store
        if place == "path":
            path_values[name] = value
        elif place == "query" and draw(st.booleans()):
            query[name] = value
        elif place == "header" and draw(st.booleans()):
            headers[name] = draw(st.from_regex(r"[A-Za-z0-9.:-]{1,16}", fullmatch=True))
    return build(template, path_values, query, headers)


@pytest.mark.parametrize(("method", "template"), OPERATIONS, ids=OPERATION_IDS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_undocumented_answer(live: tuple[Cluster, asyncio.Runner], method: str, template: str, data: Any) -> None:
    cluster, runner = live
    answer = send(cluster, runner, method, data.draw(requests(method, template), label="request"))
    check(method, template, answer.status_code, answer.headers, answer.content)
