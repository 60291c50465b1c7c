"""The coverage sweep: every operation of openapi.yaml, one parameter varied at a time, in every condition."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (dev extra: pyyaml)")

from tests.api.conformance import OPERATION_IDS, OPERATIONS, check, send, sweep
from tests.api.fakes import Cluster


@pytest.mark.parametrize(("method", "template"), OPERATIONS, ids=OPERATION_IDS)
def test_no_undocumented_answer(live: tuple[Cluster, asyncio.Runner], method: str, template: str) -> None:
    cluster, runner = live
    for request in sweep(method, template):
        answer = send(cluster, runner, method, request)
        try:
            check(method, template, answer.status_code, answer.headers, answer.content)
        except AssertionError as exc:
            raise AssertionError(f"request {request}: {exc}") from None
