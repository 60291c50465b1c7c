"""The README's examples run as written.

Every ```python block directly preceded by the line `<!-- readme-test -->` is executed, each in a
fresh namespace, with the working directory set to a temporary one.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- readme-test -->"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def _tested_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the first code line, code) of every marked block."""
    blocks = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        if before == MARKER:
            if match.group(1) != "python":
                raise AssertionError(f"README block marked {MARKER} at offset {match.start()} is not ```python")
            blocks.append((text.count("\n", 0, match.start()) + 2, match.group(2)))
    return blocks


def _run(code: str, line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), {"__name__": "readme"})
    return out.getvalue()


_BLOCKS = _tested_blocks(README.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("line", "code"), _BLOCKS, ids=[f"README.md:{line}" for line, _ in _BLOCKS])
def test_readme_block_runs(line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run(code, line, tmp_path, monkeypatch)


def test_processor_api_section_shows_what_its_example_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Processor API")
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    first_line, last_line = text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1
    line, code = next((ln, c) for ln, c in _tested_blocks(text) if first_line < ln < last_line)
    shown = [m.group(2) for m in BLOCK.finditer(text, start, end) if m.group(1) == ""]
    assert shown, "the Processor API section shows the description its example prints"
    assert _run(code, line, tmp_path, monkeypatch).rstrip("\n") == shown[0].rstrip("\n")
