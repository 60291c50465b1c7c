"""The local broker: the CLI's READY line and clean stop, no orphan JVM, the session fixture."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from streams_core.broker import BrokerError, LocalKafkaBroker, find_kafka_libs
from tests.kafka_utils import create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

READY = re.compile(r"^READY 127\.0\.0\.1:(\d+)$")


def _start_cli(data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    """Run the CLI with --port 0 and wait for its READY line; return the process and port."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streams_core.broker",
            "--port",
            "0",
            "--data-dir",
            str(data_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    match = READY.match(line.rstrip("\n"))
    if not match:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"no READY line (got {line!r}); stderr:\n{err}")
    return proc, int(match.group(1))


def _jvm_children(pid: int) -> list[int]:
    """Pids of kafka.Kafka JVMs whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"kafka.Kafka" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _listening_addresses(port: int) -> set[str]:
    """Local IPv4/IPv6 addresses (hex, as in /proc/net/tcp*) listening on ``port``."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(port_hex, 16) == port:  # 0A = LISTEN
                addresses.add(address)
    return addresses


async def _list_topics(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_cli_ready_connect_and_clean_stop(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    proc, port = _start_cli(tmp_path / "broker")
    try:
        (jvm,) = _jvm_children(proc.pid)
        assert os.getpgid(jvm) == jvm, "the JVM runs in its own process group"
        assert isinstance(await _list_topics(f"127.0.0.1:{port}"), list)
        loopback = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, ::ffff:127.0.0.1
        listening = _listening_addresses(port)
        assert listening and listening <= loopback, f"bound to 127.0.0.1 only: {listening}"
        proc.send_signal(stop_signal)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == "", "the READY line is the only output"
    assert _wait_gone(jvm), f"JVM {jvm} still running after the CLI exited"
    assert (tmp_path / "broker" / "server.log").exists()


async def test_cli_killed_with_sigkill_takes_the_jvm_along(tmp_path: Path) -> None:
    proc, _port = _start_cli(tmp_path / "broker")
    (jvm,) = _jvm_children(proc.pid)
    proc.kill()
    proc.wait(timeout=10)
    assert _wait_gone(jvm), f"JVM {jvm} outlived its killed parent (PR_SET_PDEATHSIG)"


async def test_fixture_broker_is_usable(
    kafka_broker: LocalKafkaBroker, bootstrap_servers: str
) -> None:
    assert kafka_broker.is_running()
    assert bootstrap_servers == kafka_broker.bootstrap_servers or os.environ.get(
        "STREAMS_TEST_BOOTSTRAP_SERVERS"
    )
    topic = unique_topic("fixture")
    await create_topic(bootstrap_servers, topic, partitions=2)
    await create_topic(bootstrap_servers, topic, partitions=2)  # idempotent
    await produce(
        bootstrap_servers, topic, [(b"k1", b"v1", 0), (b"k2", b"v2", 1), (None, b"v3", 1)]
    )
    records = await read_all(bootstrap_servers, topic)
    assert [(r.partition, r.key, r.value) for r in records] == [
        (0, b"k1", b"v1"),
        (1, b"k2", b"v2"),
        (1, None, b"v3"),
    ]


async def test_auto_create_topics_is_off(bootstrap_servers: str) -> None:
    """Topics exist only when created: a typo in a topic name fails instead of creating it."""
    topic = unique_topic("never-created")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        (desc,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    assert desc["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert topic not in await _list_topics(bootstrap_servers)


def test_missing_jars_error_names_make_setup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STREAMS_KAFKA_LIBS", str(tmp_path / "nowhere"))
    with pytest.raises(BrokerError, match="make setup"):
        find_kafka_libs()
    with pytest.raises(BrokerError, match="make setup"):
        LocalKafkaBroker(tmp_path / "data").start()


def test_start_failure_reports_the_log_tail(tmp_path: Path) -> None:
    """A port already taken makes the JVM exit: start() says so and shows the logs' tails."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = LocalKafkaBroker(tmp_path / "data", port=port)
        with pytest.raises(BrokerError) as info:
            broker.start()
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "exited with code" in message
    assert "tail of" in message
    assert not broker.is_running()
