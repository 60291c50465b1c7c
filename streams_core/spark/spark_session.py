"""The SparkSession the runner uses: the Kafka connector jars as local `spark.jars`, UI off, 127.0.0.1.

The jars are the ones `make setup` copies from Maven Central into `.cache/spark-kafka-<version>/jars`
(deps/spark/pom.xml); `STREAMS_SPARK_JARS_DIR` points elsewhere (e.g. an installed package).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_SPARK_CONF", "QUIET_SPARK_CONF", "build_session", "connector_jars", "quiet_session", "spark_conf", "worker_python"]

log = logging.getLogger(__name__)

JARS_DIR_ENV = "STREAMS_SPARK_JARS_DIR"
_REPO_ROOT = Path(__file__).resolve().parents[2]

#: Defaults for a session the runner builds itself; `spark.*` keys of the runner's config win.
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # transformWithState needs RocksDB state; changelog checkpointing keeps commits small.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


#: What keeps a session the runner builds quiet (unless `worker_output=True`): Spark's own log at
#: ERROR from the start (`spark.log.level`, before `setLogLevel` can run), and no Python warnings
#: printed by the workers (pandas' and pyarrow's deprecation notices, per worker and batch).
QUIET_SPARK_CONF: Mapping[str, str] = {
    "spark.log.level": "ERROR",
    "spark.executorEnv.PYTHONWARNINGS": "ignore",
}


def connector_jars(jars_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Absolute paths of the spark-sql-kafka connector jars (and its dependencies), sorted.

    Raises FileNotFoundError naming the directory and `make setup` when they are missing.
    """
    if jars_dir is None:
        jars_dir = os.environ.get(JARS_DIR_ENV)
    if jars_dir is None:
        candidates = sorted(_REPO_ROOT.glob(".cache/spark-kafka-*/jars"))
        if not candidates:
            raise FileNotFoundError(
                f"no Spark Kafka connector jars under {_REPO_ROOT / '.cache'}: run `make setup` "
                f"(or set ${JARS_DIR_ENV} to a directory holding them)"
            )
        jars_dir = candidates[-1]
    directory = Path(jars_dir)
    jars = sorted(str(p.resolve()) for p in directory.glob("*.jar"))
    if not any("spark-sql-kafka" in Path(j).name for j in jars):
        raise FileNotFoundError(f"{directory} holds no spark-sql-kafka jar: run `make setup`")
    return jars


def spark_conf(overrides: Mapping[str, Any] | None = None, preset: Mapping[str, str] | None = None) -> dict[str, str]:
    """The defaults, the connector jars as `spark.jars`, then `overrides` (the config's `spark.*` keys).

    Defaults give way to `preset` (what spark-submit already set: its master, its `--jars`).
    """
    preset = preset or {}
    conf = {k: v for k, v in DEFAULT_SPARK_CONF.items() if k not in preset}
    # Python workers run this interpreter (its venv has streams_core and its dependencies).
    conf.setdefault("spark.pyspark.python", sys.executable)
    if "spark.jars" not in preset:
        conf["spark.jars"] = ",".join(connector_jars())
    for key, value in (overrides or {}).items():
        conf[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return conf


def _under_spark_submit() -> bool:
    """True in a driver started by spark-submit (it sets the gateway up before our code runs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(overrides: Mapping[str, Any] | None = None, app_name: str = "streams-core") -> Any:
    """getOrCreate a SparkSession with `spark_conf(overrides)` (an existing session keeps its master and jars)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    preset = dict(SparkConf().getAll()) if _under_spark_submit() else {}
    conf = spark_conf(overrides, preset)
    # A SparkContext started from Python takes its workers' interpreter from $PYSPARK_PYTHON only.
    if "PYSPARK_PYTHON" not in os.environ:
        local = conf.get("spark.master", preset.get("spark.master", "")).startswith("local")
        os.environ["PYSPARK_PYTHON"] = worker_python() if local else sys.executable
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    log.info("Spark session %s (master %s)", session.version, session.sparkContext.master)
    return session


_WORKER_PYTHON = """#!/bin/sh
# Written by streams_core.spark.spark_session: Spark's Python processes import the installed pyspark,
# its bytecode cached, instead of its python/lib/pyspark.zip, which zipimport compiles from source at
# every start.
set -f
kept=
IFS=:
for entry in ${{PYTHONPATH-}}; do
    case $entry in
        {zips}) ;;
        *) kept=${{kept:+$kept:}}$entry ;;
    esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {python} "$@"
"""


def worker_python(python: str = sys.executable, directory: str | None = None) -> str:
    """The interpreter for Spark's Python processes on this machine: `python` started without the
    installed pyspark's `python/lib/pyspark.zip` on its path, so it imports that pyspark from its
    package directory with cached bytecode (a process started from the zip compiles pyspark's
    modules from source: 1-2 s per worker and per `transformWithStateInPandas` query's planning,
    bench/LOG.md). A shell script in the temp directory, named by its content; `python` itself when
    the installed pyspark has no zip (e.g. a Spark distribution's own)."""
    import hashlib
    import shlex
    import tempfile

    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    package = Path(pyspark.__file__).parent
    # The zip as Spark may name it (SPARK_HOME, found as pyspark finds it), if it is this package's own.
    homes = (package, package.resolve(), Path(_find_spark_home()))
    zips = {str(home / "python" / "lib" / "pyspark.zip") for home in homes if home.resolve() == package.resolve()}
    if not any(Path(z).is_file() for z in zips):
        return python
    script = _WORKER_PYTHON.format(zips="|".join(shlex.quote(z) for z in sorted(zips)), python=shlex.quote(python))
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    path = Path(directory or tempfile.gettempdir()) / f"streams-core-python-{digest}"
    if not path.is_file():
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(script)
        partial.chmod(0o755)
        partial.replace(path)
    return str(path)


def quiet_session(session: Any) -> None:
    """Keep Spark's own log output (the JVM's WARN and INFO lines, which the Python workers' stderr
    joins in local mode) out of the user's terminal: ERROR and above only. `SparkRunner(...,
    worker_output=True)` skips this."""
    session.sparkContext.setLogLevel("ERROR")
