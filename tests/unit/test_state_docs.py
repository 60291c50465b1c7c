"""docs/state.md's examples run as written (blocks marked `<!-- readme-test -->`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "state.md"
MARKER = "<!-- readme-test -->"
BLOCK = re.compile(r"^```python\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def _marked_blocks() -> list[tuple[int, str]]:
    text = DOC.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        if text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip() == MARKER:
            blocks.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return blocks


_BLOCKS = _marked_blocks()


def test_the_page_has_a_tested_example() -> None:
    assert _BLOCKS


@pytest.mark.parametrize(("line", "code"), _BLOCKS, ids=[f"state.md:{line}" for line, _ in _BLOCKS])
def test_doc_block_runs(line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile("\n" * (line - 1) + code, str(DOC), "exec"), {"__name__": "state_doc"})
