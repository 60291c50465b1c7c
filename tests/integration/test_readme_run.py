"""The README's "Run an application" as a user runs it, against the real broker: the topics
command, then the example as a script, which serves REST, counts, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from tests.integration.group_protocol import GROUP_PROTOCOL, UNDER_STREAMS
from tests.integration.streams_testkit import committed_offsets
from tests.kafka_utils import produce

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _readme_run() -> tuple[list[str], str]:
    """The section's topics command (as argv) and its example that calls `api.run`."""
    blocks = BLOCK.findall(_section("Run an application"))
    command = next(code for lang, code in blocks if not lang and "streams_core.tools topics create" in code)
    example = next(code for lang, code in blocks if lang == "python" and "api.run(streams)" in code)
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[0] == ".venv/bin/python"
    return [sys.executable, *argv[1:]], example


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the README example no longer has {old!r} once"
    return text.replace(old, new)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _get(url: str) -> httpx.Response | None:
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return await client.get(url)
    except httpx.TransportError:
        return None


async def _until(
    what: str, process: subprocess.Popen[bytes], check: Callable[[], Awaitable[bool]], timeout: float = 90
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"the example exited ({process.returncode}) before {what}"
        if await check():
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


async def test_the_readme_example_serves_rest_and_stops_on_sigterm(bootstrap_servers: str, tmp_path: Path) -> None:
    command, example = _readme_run()
    command = [arg.replace("127.0.0.1:9092", bootstrap_servers) for arg in command]
    # Other tests of the session may have made these topics already: the rest of the command as written.
    topics = await asyncio.to_thread(subprocess.run, [*command, "--if-not-exists"], cwd=ROOT, capture_output=True, text=True)
    assert topics.returncode == 0, topics.stderr[-2000:]

    app_id, port, state_dir = f"readme-{uuid.uuid4().hex[:8]}", _free_port(), tmp_path / "state"
    script = _replace(example, '"127.0.0.1:9092"', repr(bootstrap_servers))
    script = _replace(script, '"127.0.0.1:7070"', repr(f"127.0.0.1:{port}"))
    script = _replace(script, '"/var/lib/streams"', repr(str(state_dir)))
    # Under STREAMS_TEST_GROUP_PROTOCOL=streams the script names the protocol (it reads no environment).
    protocol = f", 'group.protocol': {GROUP_PROTOCOL!r}" if UNDER_STREAMS else ""
    script = _replace(script, '"application.id": "wordcount"', f'"application.id": {app_id!r}{protocol}')
    (tmp_path / "readme_app.py").write_text(script, encoding="utf-8")
    log = (tmp_path / "readme_app.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(tmp_path / "readme_app.py")], cwd=ROOT, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        async def ready() -> bool:
            answer = await _get(f"{base}/ready")
            return answer is not None and answer.status_code == 200

        await _until("/ready", process, ready)
        word = f"readme{uuid.uuid4().hex[:6]}"
        await produce(bootstrap_servers, "TextLinesTopic", [(None, f"{word} {word} and {word}".encode())])

        async def counted() -> bool:
            answer = await _get(f"{base}/state/keyvalue/word-count/{word}")
            return answer is not None and answer.status_code == 200 and answer.json() == {"key": word, "value": 3}

        await _until(f"the count of {word} over REST", process, counted)
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    output = (tmp_path / "readme_app.log").read_text(errors="replace")
    assert code == 0, output[-3000:]
    assert await _get(f"{base}/health") is None, "the REST server stopped"
    offsets = await committed_offsets(bootstrap_servers, app_id)
    assert any(tp.topic == "TextLinesTopic" for tp in offsets), f"a clean close commits: {offsets}"
    assert list((state_dir / app_id).glob("*/.checkpoint")), "a clean close checkpoints the task state"
