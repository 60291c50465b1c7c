"""Where the local broker's pieces are: the Kafka jars (from deps/kafka/pom.xml's version) and java."""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

__all__ = [
    "ENV_LIBS",
    "REPO_ROOT",
    "BrokerError",
    "check_logging_backend",
    "find_kafka_libs",
    "java_executable",
    "kafka_cache_dir",
]

log = logging.getLogger(__name__)

ENV_LIBS = "STREAMS_KAFKA_LIBS"
"""Environment variable naming a directory of broker jars (instead of the repository's .cache)."""

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository: deps/ (the poms) and .cache/ (the fetched jars)."""


class BrokerError(RuntimeError):
    """The local broker could not be found, started or stopped."""


def _kafka_version(repo_root: Path) -> str:
    """Read ``<kafka.version>`` from deps/kafka/pom.xml, the single source of the version."""
    pom = repo_root / "deps" / "kafka" / "pom.xml"
    try:
        match = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    except OSError as exc:
        raise BrokerError(f"cannot read the Kafka version from {pom}: {exc}") from exc
    if not match:
        raise BrokerError(f"no <kafka.version> in {pom}")
    return match.group(1)


def kafka_cache_dir() -> Path:
    """``.cache/kafka-<version>``: the broker's jars in ``libs/``, kafka-tools' in ``tools/``."""
    return REPO_ROOT / ".cache" / f"kafka-{_kafka_version(REPO_ROOT)}"


def find_kafka_libs() -> Path:
    """Return the directory of broker jars: ``$STREAMS_KAFKA_LIBS`` or the repo's ``.cache``."""
    env = os.environ.get(ENV_LIBS)
    if env:
        libs = Path(env).expanduser().resolve()
        hint = f"(from ${ENV_LIBS})"
    else:
        libs = kafka_cache_dir() / "libs"
        hint = "(from deps/kafka/pom.xml)"
    if not libs.is_dir() or not any(libs.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"Kafka broker jars not found in {libs} {hint}: run `make setup` in {REPO_ROOT} "
            f"(it fetches them from Maven Central), or point ${ENV_LIBS} at a directory of them"
        )
    return libs


def check_logging_backend(libs: Path) -> None:
    """Warn when the jars hold no working slf4j binding, since the broker log is then empty."""
    names = [p.name for p in libs.glob("*.jar")]
    slf4j_1 = any(n.startswith("slf4j-api-1.") for n in names)
    only_slf4j2_binding = any(n.startswith("log4j-slf4j2-impl-") for n in names) and not any(
        n.startswith("log4j-slf4j-impl-") for n in names
    )
    if slf4j_1 and only_slf4j2_binding:
        log.warning(
            "broker logging is off: %s has slf4j-api 1.x with only the slf4j 2 binding "
            "(log4j-slf4j2-impl); use log4j-slf4j-impl in deps/kafka/pom.xml",
            libs,
        )


def java_executable() -> str:
    """The java executable: ``$JAVA_HOME/bin/java`` or ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise BrokerError("java not found (Kafka 4.x needs Java 17+): install it or set JAVA_HOME")
    return found
