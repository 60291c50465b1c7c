"""openapi.yaml is the contract: the app must serve exactly the API it documents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.contract import differences, load_contract, outline
from tests.api.fakes import HOST_A, Cluster

pytest.importorskip("yaml", reason="the contract test reads openapi.yaml with PyYAML (dev extra: pyyaml)")


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Any]]:
    cluster = Cluster()
    try:
        yield cluster.app[HOST_A].openapi()
    finally:
        cluster.close()


def test_openapi_yaml_and_the_served_schema_agree(served: dict[str, Any]) -> None:
    lines = differences(outline(load_contract()), outline(served))
    assert not lines, "openapi.yaml and the served schema disagree:\n  " + "\n  ".join(lines)


def test_every_state_route_documents_its_errors(served: dict[str, Any]) -> None:
    contract = outline(load_contract())
    for name, operation in contract["operations"].items():
        if " /state/" in name:
            assert {"404", "503"} <= set(operation["responses"]) or name.endswith(("/state/instances", "/state/lags")), name
            assert "Retry-After" in operation["responses"]["503"]["headers"], name
            assert "X-Served-By" in operation["responses"]["200"]["headers"], name


def test_the_served_schema_has_no_validation_422(served: dict[str, Any]) -> None:
    statuses = {status for item in served["paths"].values() for op in item.values() for status in op["responses"]}
    assert "422" not in statuses
    assert "HTTPValidationError" not in served.get("components", {}).get("schemas", {})


def test_differences_name_the_place_and_both_sides() -> None:
    contract = {"operations": {"GET /x": {"parameters": {"path key": {"type": "string"}}}}}
    served = {"operations": {"GET /x": {"parameters": {"path key": {"type": "integer"}}}, "GET /y": {}}}
    assert differences(contract, served) == [
        "operations / GET /x / parameters / path key / type: openapi.yaml says 'string', the app serves 'integer'",
        "operations / GET /y: served, not in openapi.yaml",
    ]
