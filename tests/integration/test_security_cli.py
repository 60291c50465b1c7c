"""The command lines against the secured broker: the topics, acls, produce and consume tools with `--command-config`,
and `python -m app wordcount` with security flags and its password from STREAMS_SASL_PLAIN_PASSWORD."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streams_core.broker import LocalKafkaBroker
from tests.integration.security_kit import PASSWORDS, expected_counts, produce_lines, read_counts
from tests.kafka_utils import unique_topic

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@pytest.mark.slow
async def test_tools_and_app_cli_over_sasl(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    admin = secure_broker.client_config("SASL_SSL")
    admin_file = _properties(tmp_path / "admin.properties", {k: v for k, v in admin.items() if k != "bootstrap.servers"})
    bootstrap = admin["bootstrap.servers"]
    app_id, source, sink = unique_topic("cliapp"), unique_topic("lines"), unique_topic("counts")
    console = unique_topic("console")

    made = await asyncio.to_thread(
        _run, "streams_core.tools", "topics", "create", source, sink, console, "--partitions", "4",
        "--bootstrap-servers", bootstrap, "--command-config", str(admin_file),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    listed = await asyncio.to_thread(
        _run, "streams_core.tools", "topics", "list", "--bootstrap-servers", bootstrap, "--command-config", str(admin_file)
    )
    assert source in listed.stdout and sink in listed.stdout
    sent = await asyncio.to_thread(
        _run, "streams_core.tools", "produce", console, "--parse-key", "--value-serde", "long",
        "--bootstrap-servers", bootstrap, "--command-config", str(admin_file), stdin="a\t1\nb\t2\n",
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    read = await asyncio.to_thread(
        _run, "streams_core.tools", "consume", console, "--from-beginning", "--print-key", "--value-serde", "long",
        "--max-messages", "2", "--timeout-ms", "20000", "--bootstrap-servers", bootstrap, "--command-config", str(admin_file),
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert sorted(read.stdout.splitlines()) == ["a\t1", "b\t2"]
    granted = await asyncio.to_thread(
        _run, "streams_core.tools", "acls", "--application-id", app_id, "--principal", "User:bob",
        "--input", source, "--output", sink, "--create", "--bootstrap-servers", bootstrap,
        "--command-config", str(admin_file),
    )  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    assert f"created User:bob ALLOW READ on GROUP '{app_id}'" in granted.stdout
    # bob may not create topics: the app finds its input and output made above (4 partitions, as it wants).
    lines = ["secure words here", "more secure words"] * 5
    await produce_lines(secure_broker, source, lines)
    plain = secure_broker.client_config("SASL_PLAINTEXT", user="bob")
    ran = await asyncio.to_thread(
        _run, "app", "wordcount", "--bootstrap-servers", plain["bootstrap.servers"], "--autostop", "eol",
        "--input-topic", source, "--output-topic", sink,
        "--application-server", f"127.0.0.1:{_free_port()}", "--state-dir", str(tmp_path / "state"),
        "--application-id", app_id, "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
        "--sasl-username", "bob",
        env={"STREAMS_SASL_PLAIN_PASSWORD": PASSWORDS["bob"]}, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert PASSWORDS["bob"] not in ran.stdout + ran.stderr
    expected = expected_counts(lines)
    assert await read_counts(secure_broker, sink, expected, partitions=4, timeout=20) == expected

    reset = await asyncio.to_thread(
        _run, "streams_core.tools", "reset", "--application-id", app_id, "--input-topics", source,
        "--bootstrap-servers", bootstrap, "--command-config", str(admin_file),
    )  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    assert f"{app_id}-word-count-changelog" in reset.stdout, reset.stdout


@pytest.mark.slow
async def test_broker_cli_with_security(tmp_path: Path) -> None:
    """`python -m streams_core.broker` with listeners, users and the authorizer prints where
    everything is before READY, and its super user's password only into a 0600 file."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams_core.broker", "--port", "0", "--data-dir", str(tmp_path / "k"),
         "--listener", "SASL_SSL", "--listener", "SSL", "--scram-user", "ann:ann-pw-123", "--cert-user", "cy",
         "--ssl-client-auth", "--authorizer", "--timeout", "90"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        while not lines or not lines[-1].startswith("READY"):
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 120)
            assert line, f"broker exited: {lines}"
            lines.append(line.strip())
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    kinds = [line.split()[0] for line in lines]
    assert kinds == ["LISTENER", "LISTENER", "CA", "CERT", "SUPER_USER", "READY"], lines
    assert lines[0].split()[2] == lines[-1].split()[1], "READY names the first listener"
    password_file = Path(lines[4].split()[2])
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"
    assert password_file.read_text().strip() not in "\n".join(lines)
