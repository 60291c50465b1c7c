"""The container, without a Docker engine: the image's entrypoint and health check run here, and the
compose file parses and names only environment variables the app reads."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from app.settings import env_name
from streams_core import StreamsConfig
from tests.integration.rest_cluster import REPO_ROOT, free_port
from tests.kafka_utils import unique_topic

DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
COMPOSE = REPO_ROOT / "docker" / "compose.yaml"
APP_ENV = {env_name(key) for key in StreamsConfig.documentation()} | {
    "STREAMS_BIND_HOST", "STREAMS_PORT", "STREAMS_LOG_LEVEL", "STREAMS_LOG_FORMAT",
}  # fmt: skip
"""Every STREAMS_* variable app/ reads."""


def _instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the final stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    final = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return [(line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in lines[final:]]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in _instructions():
        if instruction == "ENV":
            env.update(pair.split("=", 1) for pair in args.split())
    return env


def _exec_form(instruction: str) -> list[str]:
    args = next(a for i, a in _instructions() if i == instruction)
    return list(json.loads(args[args.index("[") :]))


def test_image_is_slim_non_root_and_checks_health() -> None:
    instructions = _instructions()
    assert instructions[0][1].startswith("python:3.11-slim")
    user = next(a for i, a in instructions if i == "USER")
    assert user not in ("root", "0")
    assert any(i == "HEALTHCHECK" and "/health" in a for i, a in instructions)
    build = DOCKERFILE.read_text()
    assert "pip install ." in build and "[dev]" not in build, "the package without its dev extras"
    assert set(k for k in _image_env() if k.startswith("STREAMS_")) <= APP_ENV


def test_compose_parses_and_names_only_known_env_vars() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"], "KRaft"
    replicas = sorted(name for name in services if name.startswith("wordcount-"))
    assert replicas == ["wordcount-1", "wordcount-2", "wordcount-3"]
    for name in replicas:
        env = services[name]["environment"]
        assert set(env) <= APP_ENV, f"{name} sets variables the app does not read: {set(env) - APP_ENV}"
        assert env["STREAMS_APPLICATION_SERVER"] == f"{name}:7070", "a stable name the others reach"
        assert services[name]["hostname"] == name
    assert "TextLinesTopic" in " ".join(services["producer"]["command"])


@pytest.mark.broker
def test_entrypoint_runs_healthy_with_json_logs_and_stops_on_sigterm(bootstrap_servers: str, tmp_path: Path) -> None:
    """ENTRYPOINT + CMD with the image's ENV (state dir, bind host and port made local), then its HEALTHCHECK."""
    port = free_port()
    env = {
        **os.environ, **_image_env(),
        "STREAMS_STATE_DIR": str(tmp_path), "STREAMS_BIND_HOST": "127.0.0.1", "STREAMS_PORT": str(port),
        "STREAMS_APPLICATION_SERVER": f"127.0.0.1:{port}", "STREAMS_BOOTSTRAP_SERVERS": bootstrap_servers,
        "STREAMS_APPLICATION_ID": unique_topic("container"), "STREAMS_COMMIT_INTERVAL_MS": "200",
    }  # fmt: skip
    command = _exec_form("ENTRYPOINT") + _exec_form("CMD")
    assert command[0] == "python"
    health = _exec_form("HEALTHCHECK")
    process = subprocess.Popen([sys.executable, *command[1:]], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            probe = subprocess.run([sys.executable, *health[1:]], env=env, capture_output=True, timeout=10)
            if probe.returncode == 0:
                break
            assert time.monotonic() < deadline, "the HEALTHCHECK never passed"
            time.sleep(1)
        while httpx.get(f"http://127.0.0.1:{port}/ready", timeout=5).status_code != 200:  # RUNNING, then stop
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]
    entries = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert entries, stderr[-3000:]
    assert len(entries) == len(stderr.splitlines()), "every log line is JSON (STREAMS_LOG_FORMAT=json in the image)"
    messages = [e["message"] for e in entries]
    assert any("state REBALANCING -> RUNNING" in m for m in messages), messages
    assert any(e.get("thread", "").endswith("StreamThread-1") and "rebalance: assigned active tasks" in e["message"] for e in entries)
