"""Idempotent installs of the peers into .cache/peers/: one virtual environment per Python system, the
Kafka Streams jars from Maven Central and the compiled bench class, and the harness's own venv for the
chart (matplotlib is no project dependency). A marker per install records what it holds; a changed pin
or source reinstalls.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "peers"
HERE = Path(__file__).resolve().parent

# The newest releases that install on CPython 3.11 here (2026-11); `pip install` fetches them.
PINS: dict[str, list[str]] = {
    "quix": ["quixstreams==3.28.1"],
    "faust": ["faust-streaming==0.15.3", "rocksdict==0.3.29"],
    "chart": ["matplotlib==3.11.2"],
}


def _marked(marker: Path, content: str) -> bool:
    return marker.exists() and marker.read_text() == content


def venv_python(name: str) -> Path:
    """The venv's python, created and filled with PINS[name] unless it already holds them."""
    home = CACHE / name
    python = home / "bin" / "python"
    marker = home / ".installed"
    wanted = " ".join(PINS[name])
    if _marked(marker, wanted) and python.exists():
        return python
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PINS[name]], check=True)
    marker.write_text(wanted)
    print(f"installed {wanted} into {home} in {time.perf_counter() - started:.0f} s", flush=True)
    return python


def kafka_version() -> str:
    """The broker's Kafka version (deps/kafka/pom.xml), which the Kafka Streams pom must match."""
    text = (ROOT / "deps" / "kafka" / "pom.xml").read_text()
    return text.split("<kafka.version>")[1].split("</kafka.version>")[0]


def kstreams_classpath() -> str:
    """kafka-streams' jars and the compiled PeersBench class, fetched and built unless already there."""
    home = CACHE / "kstreams"
    pom, source = HERE / "kstreams" / "pom.xml", HERE / "kstreams" / "PeersBench.java"
    if f"<kafka.version>{kafka_version()}</kafka.version>" not in pom.read_text():
        raise SystemExit(f"{pom}: kafka.version differs from the broker's {kafka_version()}")
    digest = hashlib.sha256(pom.read_bytes() + source.read_bytes()).hexdigest()
    libs, classes, marker = home / "libs", home / "classes", home / ".installed"
    if not _marked(marker, digest):
        started = time.perf_counter()
        subprocess.run(["rm", "-rf", str(home)], check=True)
        subprocess.run(["mvn", "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={libs}"], check=True)
        subprocess.run(["javac", "-d", str(classes), "-cp", f"{libs}/*", str(source)], check=True)
        marker.write_text(digest)
        print(f"fetched kafka-streams {kafka_version()} and compiled PeersBench in {time.perf_counter() - started:.0f} s",
              flush=True)
    return f"{classes}:{libs}/*"


def installed_version(python: Path, distribution: str) -> str:
    out = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def install_all() -> dict[str, str]:
    """Every install the harness needs; returns what each system runs, with versions."""
    quix, faust = venv_python("quix"), venv_python("faust")
    venv_python("chart")
    kstreams_classpath()
    return {"quixstreams": installed_version(quix, "quixstreams"),
            "faust-streaming": installed_version(faust, "faust-streaming"),
            "rocksdict (faust)": installed_version(faust, "rocksdict"),
            "rocksdict (quix)": installed_version(quix, "rocksdict"),
            "confluent-kafka (quix)": installed_version(quix, "confluent-kafka"),
            "aiokafka (faust)": installed_version(faust, "aiokafka"),
            "kafka-streams": kafka_version()}


if __name__ == "__main__":
    print(install_all())
