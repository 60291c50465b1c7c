"""Kafka's own admin tools (the kafka-tools jar) on the broker's jars, e.g. what kafka-streams-groups.sh runs.

`make setup` fetches only the broker. kafka-tools (54 MB with its dependencies: Connect, Jetty,
Jersey) is fetched the first time a tool is asked for, by Maven from deps/kafka-tools/pom.xml (the
broker's pom as parent, so one version and one dependency resolution) into
``.cache/kafka-<version>/tools``, under a file lock and a deadline; later runs reuse it.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from streams_core.broker.installation import REPO_ROOT, BrokerError, java_executable, kafka_cache_dir

__all__ = ["ENV_TOOLS_LIBS", "FETCH_DEADLINE_S", "TOOLS", "kafka_tool_command", "kafka_tools_libs", "tool_main"]

log = logging.getLogger(__name__)

ENV_TOOLS_LIBS = "STREAMS_KAFKA_TOOLS_LIBS"
"""Environment variable naming a directory of kafka-tools' jars and their dependencies (no fetch)."""

FETCH_DEADLINE_S = 600.0
"""Longest a first fetch may take (a fresh Maven repository downloads about 90 jars)."""

TOOLS: dict[str, str] = {"streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand"}
"""Tool name (the distribution's ``kafka-<name>.sh``) -> the main class it runs."""

_POMS = (REPO_ROOT / "deps" / "kafka" / "pom.xml", REPO_ROOT / "deps" / "kafka-tools" / "pom.xml")


def _poms_digest() -> str:
    return hashlib.sha256(b"".join(pom.read_bytes() for pom in _POMS)).hexdigest()


def _has_tools(libs: Path) -> bool:
    return libs.is_dir() and any(libs.glob("kafka-tools-[0-9]*.jar"))


def kafka_tools_libs(deadline_s: float = FETCH_DEADLINE_S) -> Path:
    """The directory of kafka-tools' jars: ``$STREAMS_KAFKA_TOOLS_LIBS``, or the cache, fetched first if needed."""
    env = os.environ.get(ENV_TOOLS_LIBS)
    if env:
        libs = Path(env).expanduser().resolve()
        if not _has_tools(libs):
            raise BrokerError(f"no kafka-tools jar in {libs} (from ${ENV_TOOLS_LIBS})")
        return libs
    home = kafka_cache_dir()
    libs, marker, digest = home / "tools", home / "tools" / ".complete", _poms_digest()
    if marker.exists() and marker.read_text() == digest:
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with (home / "tools.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process fetching: wait for it (it has the deadline)
        if marker.exists() and marker.read_text() == digest:
            return libs
        _fetch(libs, deadline_s)
        marker.write_text(digest)
    return libs


def _fetch(libs: Path, deadline_s: float) -> None:
    """Copy kafka-tools and its runtime dependencies into `libs` with Maven, within `deadline_s`."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(f"mvn not found: it fetches kafka-tools from Maven Central (or set ${ENV_TOOLS_LIBS})")
    partial = libs.with_name(f"{libs.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-B", "-q", "-f", str(_POMS[1]), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={partial}"]  # fmt: skip
    log.warning("fetching kafka-tools from Maven Central into %s (once)", libs)
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline_s, check=False)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise BrokerError(
            f"fetching kafka-tools took over {deadline_s:.0f} s: is Maven Central reachable? ({' '.join(cmd)})"
        ) from exc
    if done.returncode != 0 or not _has_tools(partial):
        shutil.rmtree(partial, ignore_errors=True)
        output = (done.stdout + done.stderr).strip()[-3000:]
        raise BrokerError(
            f"fetching kafka-tools failed (exit {done.returncode}); is Maven Central reachable? "
            f"({' '.join(cmd)}):\n{output}"
        )
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    log.warning("fetched kafka-tools in %.1f s", time.monotonic() - began)


def kafka_tool_command(tool: str, args: Sequence[str], libs: Path | None = None) -> list[str]:
    """The java command line running `tool` (a key of TOOLS) with `args`, as kafka-<tool>.sh would."""
    if tool not in TOOLS:
        raise BrokerError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOLS))}")
    classpath = libs if libs is not None else kafka_tools_libs()
    return [java_executable(), "-cp", str(classpath / "*"), TOOLS[tool], *args]


def tool_main(tool: str, args: Sequence[str]) -> int:
    """`python -m streams_core.broker <tool> ARGS...`: become the tool's JVM (its exit code is the tool's)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        cmd = kafka_tool_command(tool, args)
    except BrokerError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
