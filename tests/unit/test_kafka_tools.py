"""Fetching kafka-tools on first use (streams_core/broker/kafka_tools.py), with a fake `mvn` on the PATH: once,
then from the cache; a failing or hanging Maven is a BrokerError that says Maven Central may be unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams_core.broker import kafka_tools
from streams_core.broker.installation import BrokerError
from streams_core.broker.kafka_tools import ENV_TOOLS_LIBS, kafka_tool_command, kafka_tools_libs

# A fake mvn: counts its runs, then does what $FAKE_MVN says with the -DoutputDirectory it was given.
FAKE_MVN = """#!/bin/sh
echo run >> "$FAKE_MVN_RUNS"
for arg; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
case "$FAKE_MVN" in
  ok) mkdir -p "$out" && touch "$out/kafka-tools-9.9.9.jar" "$out/kafka-clients-9.9.9.jar";;
  fail) mkdir -p "$out"; echo "Could not transfer artifact org.apache.kafka:kafka-tools: Connection refused"; exit 1;;
  hang) exec sleep 30;;
esac
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake mvn first on the PATH and the cache in tmp_path; returns the file its runs are counted in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN)
    (bin_dir / "mvn").chmod(0o755)
    runs = tmp_path / "runs"
    runs.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_MVN_RUNS", str(runs))
    monkeypatch.delenv(ENV_TOOLS_LIBS, raising=False)
    monkeypatch.setattr(kafka_tools, "kafka_cache_dir", lambda: tmp_path / "cache")
    return runs


def test_fetched_once_then_taken_from_the_cache(fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MVN", "ok")
    libs = kafka_tools_libs()
    assert (libs / "kafka-tools-9.9.9.jar").exists()
    assert kafka_tools_libs() == libs
    assert fake_mvn.read_text().count("run") == 1
    command = kafka_tool_command("streams-groups", ["--list"], libs)
    assert command[1:] == ["-cp", f"{libs}/*", "org.apache.kafka.tools.streams.StreamsGroupCommand", "--list"]


def test_a_failed_fetch_names_maven_central_and_leaves_nothing(fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MVN", "fail")
    with pytest.raises(BrokerError, match=r"(?s)is Maven Central reachable.*Connection refused"):
        kafka_tools_libs()
    assert not any((fake_mvn.parent / "cache").glob("tools*/*.jar"))
    monkeypatch.setenv("FAKE_MVN", "ok")  # a later call fetches again
    assert (kafka_tools_libs() / "kafka-tools-9.9.9.jar").exists()


def test_a_hanging_fetch_stops_at_its_deadline(fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MVN", "hang")
    with pytest.raises(BrokerError, match=r"took over 1 s: is Maven Central reachable"):
        kafka_tools_libs(deadline_s=1.0)


def test_a_directory_of_jars_given_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_TOOLS_LIBS, str(tmp_path))
    with pytest.raises(BrokerError, match="no kafka-tools jar"):
        kafka_tools_libs()
    (tmp_path / "kafka-tools-4.3.1.jar").touch()
    assert kafka_tools_libs() == tmp_path
    with pytest.raises(BrokerError, match="unknown Kafka tool 'consumer-groups'"):
        kafka_tool_command("consumer-groups", [], tmp_path)
