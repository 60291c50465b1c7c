"""The runnable app: `python -m app demo` end to end, and clear exits for bad surroundings."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _free_pair() -> int:
    """A port p with p and p + 1 both free (the demo uses two consecutive ports)."""
    for _ in range(50):
        port = _free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_demo_runs_end_to_end() -> None:
    result = _run("demo", "--once", "--base-port", str(_free_pair()), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "Both instances are RUNNING" in out
    assert '{"key":"streams","value":5}' in out, out
    assert "/state/keyvalues/word-count/range/a/k" in out and "-> 200" in out
    assert "-> 5" not in out, "no 5xx answer"


def test_wordcount_exits_2_when_kafka_cannot_be_reached(tmp_path: Path) -> None:
    result = _run(
        "wordcount", "--bootstrap-servers", f"127.0.0.1:{_free_port()}",
        "--application-server", f"127.0.0.1:{_free_port()}", "--state-dir", str(tmp_path),
        timeout=60,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "cannot reach Kafka at 127.0.0.1:" in result.stderr


def test_wordcount_exits_3_when_the_port_is_taken(bootstrap_servers: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run(
            "wordcount", "--bootstrap-servers", bootstrap_servers,
            "--application-server", f"127.0.0.1:{port}", "--state-dir", str(tmp_path),
            "--application-id", "wordcount-port-taken",
            timeout=60,
        )
    assert result.returncode == 3, result.stderr[-2000:]
    assert f"cannot serve queries on 127.0.0.1:{port}" in result.stderr


@pytest.mark.slow
async def test_wordcount_batch_run_counts_what_was_written_and_exits_0(bootstrap_servers: str, tmp_path: Path) -> None:
    """`python -m app wordcount --autostop eol`: a KIP-95 batch run of the service, then exit 0."""
    import asyncio

    from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC
    from tests.kafka_utils import create_topic, produce, read_all, unique_topic

    app_id = unique_topic("wordcount-batch")
    for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
        await create_topic(bootstrap_servers, topic, 4)
    tag = app_id.rsplit("-", 1)[1]
    await produce(bootstrap_servers, INPUT_TOPIC, [(None, f"batch{tag} batch{tag} run{tag}".encode())] * 3)
    result = await asyncio.to_thread(
        _run,
        "wordcount", "--bootstrap-servers", bootstrap_servers, "--autostop", "eol",
        "--application-server", f"127.0.0.1:{_free_port()}", "--state-dir", str(tmp_path),
        "--application-id", app_id,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = await read_all(bootstrap_servers, OUTPUT_TOPIC)
    counts = {r.key.decode(): int.from_bytes(r.value, "big") for r in output if r.key and tag in r.key.decode()}
    assert counts[f"batch{tag}"] == 6 and counts[f"run{tag}"] == 3
