"""The house's one rule, checked: every import points down (docs/layout.md).

FLOORS lists the packages from the ground up; a module stands on the floor of the longest
prefix that names it. An import of a module on a higher floor is an arrow that points up, and
is printed with the file and line; the exit status is 1 when there is one. Imports inside
functions and under TYPE_CHECKING count too: they are ties all the same.

    .venv/bin/python tools/dev/floors.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

#: (package or module prefix, floor), ground first. runtime/'s rooms stand on floors of their own inside floor 8.
FLOORS: list[tuple[str, float]] = [
    ("streams_core.common", 1),
    ("streams_core.errors", 1),
    ("streams_core.serde", 2),
    ("streams_core.config", 3),
    ("streams_core.clients", 4),
    ("streams_core.processor", 5),
    ("streams_core.state", 6),
    ("streams_core.kstream", 7),
    ("streams_core.query", 7),
    ("streams_core.runtime.restore", 8.1),
    ("streams_core.runtime.topology_metadata", 8.1),
    ("streams_core.runtime.signal_runner", 8.1),
    ("streams_core.runtime.assignment", 8.2),
    ("streams_core.runtime.queries", 8.2),
    ("streams_core.runtime.tasks", 8.3),
    ("streams_core.runtime.topic_preparation", 8.3),
    ("streams_core.runtime.shutdown_request", 8.3),
    ("streams_core.runtime.autostop", 8.4),
    ("streams_core.runtime.threads", 8.5),
    ("streams_core.runtime.workers", 8.6),
    ("streams_core.runtime.thread_mode", 8.7),
    ("streams_core.runtime", 8.8),  # kafka_streams: the instance, on top of its rooms
    ("streams_core.spark", 9),
    ("streams_core.broker", 9),
    ("streams_core.testing", 9),
    ("streams_core.tools", 9),
    ("streams_core", 10),  # the package's face, streams_core/__init__.py
    ("api", 11),
    ("app", 12),
]

ROOTS = ["streams_core", "api", "app"]


def floor(module: str) -> float | None:
    """The floor of a dotted module name, or None outside the house."""
    best: tuple[int, float] | None = None
    for prefix, level in FLOORS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), level)
    return None if best is None else best[1]


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(node: ast.stmt, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The modules an import statement names (`from pkg import mod` names pkg.mod when that is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, *([base] if base else [])])
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    return subs or [base]


def arrows_up(root: Path) -> list[str]:
    files = [p for r in ROOTS for p in sorted((root / r).rglob("*.py")) if "__pycache__" not in p.parts]
    known = {module_of(p, root) for p in files}
    out: list[str] = []
    for path in files:
        module = module_of(path, root)
        here = floor(module)
        if here is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported(node, module, path.name == "__init__.py", known):
                there = floor(target)
                if there is not None and there > here:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {module} (floor {here}) -> {target} (floor {there})")
    return out


def main() -> None:
    up = arrows_up(Path.cwd())
    for line in up:
        print(line)
    print(f"{len(up)} import(s) point up", file=sys.stderr)
    sys.exit(1 if up else 0)


if __name__ == "__main__":
    main()
