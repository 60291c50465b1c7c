"""The interpreter `build_session` gives Spark's Python processes on a local master (spark_session.worker_python)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from streams_core.spark.spark_session import worker_python

_ZIP = Path(pyspark.__file__).resolve().parent / "python" / "lib" / "pyspark.zip"


def test_the_worker_python_imports_the_installed_pyspark_not_the_zip_spark_puts_first(tmp_path: Path) -> None:
    """Spark's PYTHONPATH puts the wheel's pyspark.zip first: the script drops it (under either name of
    the package directory) and keeps every other entry, in order; the same script is reused."""
    assert _ZIP.is_file(), "the pip wheel ships python/lib/pyspark.zip"
    script = worker_python(directory=str(tmp_path))
    assert worker_python(directory=str(tmp_path)) == script and len(list(tmp_path.iterdir())) == 1
    unresolved = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
    py4j = next(_ZIP.parent.glob("py4j-*.zip"))
    path = os.pathsep.join([str(_ZIP), str(py4j), str(unresolved), str(tmp_path / "a b"), str(Path.cwd())])
    probe = "import os, pyspark, sys; print(os.environ['PYTHONPATH']); print(pyspark.__file__)"
    done = subprocess.run([script, "-c", probe], env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    python_path, imported = done.stdout.splitlines()
    assert python_path == os.pathsep.join([str(py4j), str(tmp_path / "a b"), str(Path.cwd())])
    assert Path(imported).resolve() == Path(pyspark.__file__).resolve()


def test_without_the_zip_the_worker_python_is_the_interpreter_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pyspark without python/lib/pyspark.zip (a Spark distribution's own python/ directory): nothing to drop."""
    fake = tmp_path / "pyspark" / "__init__.py"
    fake.parent.mkdir()
    fake.write_text("")
    monkeypatch.setattr(pyspark, "__file__", str(fake))
    monkeypatch.setenv("SPARK_HOME", str(fake.parent))
    assert worker_python(directory=str(tmp_path)) == sys.executable
