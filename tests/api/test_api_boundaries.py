"""api/ and app/ build on the public API of streams_core only: no `internals` import, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "api"


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def test_api_and_app_import_no_internals_package() -> None:
    offenders = []
    for module in _modules("api", "app"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            where = module.relative_to(ROOT)
            offenders += [f"{where}: {name}" for name in names if "internals" in name.split(".")]
    assert not offenders, offenders


def test_api_modules_stay_small() -> None:
    sizes = {module.name: len(module.read_text(encoding="utf-8").splitlines()) for module in _modules("api")}
    assert max(sizes.values()) < 400, sizes
