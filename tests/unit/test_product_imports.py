"""Product code does not depend on test support: `app/`, `api/` and `streams_core/` outside
`testing/` import nothing from `streams_core.testing` (the local broker they start lives in
`streams_core.broker`; issue 38). `streams_core/__init__.py` re-exports the TopologyTestDriver and
its topics, the public test utilities, and is the one exception."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {ROOT / "streams_core" / "__init__.py"}


def _product_files() -> list[Path]:
    files = [*(ROOT / "app").rglob("*.py"), *(ROOT / "api").rglob("*.py"), *(ROOT / "streams_core").rglob("*.py")]
    return sorted(f for f in files if "testing" not in f.relative_to(ROOT).parts and f not in ALLOWED)


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def test_product_modules_import_no_test_support() -> None:
    files = _product_files()
    assert any(f.parts[-2:] == ("app", "service.py") for f in files)
    found = {
        str(path.relative_to(ROOT)): bad
        for path in files
        if (bad := [n for n in _imported_modules(path) if n == "streams_core.testing" or n.startswith("streams_core.testing.")])
    }
    assert not found, f"product modules import test support: {found}"


def test_the_check_sees_an_import_of_test_support(tmp_path: Path) -> None:
    """The walk finds both import forms, so the test above can fail."""
    module = tmp_path / "m.py"
    module.write_text("import streams_core.testing.fake_kafka\nfrom streams_core.testing import FakeKafkaCluster\n")
    assert _imported_modules(module) == [
        "streams_core.testing.fake_kafka",
        "streams_core.testing",
        "streams_core.testing.FakeKafkaCluster",
    ]
