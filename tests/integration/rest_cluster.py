"""A word-count application of several instances, each with its REST server, for the REST tests.

`WordCountCluster` starts instances of one application (one `application.id`) either in this
event loop (`KafkaStreams` + `api.serve` on a free 127.0.0.1 port: the way a test can look
inside) or as `python -m app wordcount` processes (the real service, the way a test can kill
one with SIGKILL). Every instance it started is stopped by `close()`, also after a failure,
and every child process dies with the test process (PR_SET_PDEATHSIG).

The CLI always reads `TextLinesTopic`, so a cluster with processes uses the default topics
(and a unique application id and unique words, see `make_text`); in-process-only clusters
use unique topics.

`make_text` builds lines and their independent word count; `Client` is an httpx client that
asks one instance at a time; `wait_until` polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from api import ApiSettings, ServerHandle, serve
from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, WINDOW_MS, build_topology
from streams_core import KafkaStreams, State

__all__ = [
    "FAST_CONFIG",
    "REPO_ROOT",
    "Client",
    "Instance",
    "InstanceTasks",
    "WordCountCluster",
    "free_port",
    "make_text",
    "quoted",
    "wait_until",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

FAST_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "commit.interval.ms": 100,
    "poll.ms": 50,
    "linger.ms": 5,
}
"""Quick commits and failure detection for in-process instances (the test broker allows 1 s sessions)."""

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the forked child: SIGKILL when the test process dies, so no instance outlives the test."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def quoted(text: str) -> str:
    """A key as one URL path segment (UTF-8, percent-encoded)."""
    return quote(text, safe="")


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    timeout: float,
    what: str | Callable[[], str],
    interval: float = 0.2,
) -> float:
    """Poll `predicate` until it is true and return the seconds it took; AssertionError after `timeout`."""
    start = time.monotonic()
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not met within {timeout} s: {what() if callable(what) else what}")
        await asyncio.sleep(interval)


# -- text --------------------------------------------------------------------------------------


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_UNICODE_WORDS = ("café", "naïve", "über", "straße", "smörgåsbord", "日本語", "ελληνικά")


def make_text(
    rnd: random.Random, *, words: int, lines: int, suffix: str = "", unicode: bool = True
) -> tuple[list[str], Counter[str]]:
    """`lines` lines over a vocabulary of `words` distinct words, and their count (lower-cased).

    Every word of the vocabulary appears at least once; some are capitalised in the text (the
    app lower-cases them). `suffix` is appended to every word, so that text produced to a
    shared input topic has words no other test produces.
    """
    vocabulary: set[str] = set(_UNICODE_WORDS[: words // 4]) if unicode else set()
    while len(vocabulary) < words:
        vocabulary.add("".join(rnd.choice(_LETTERS) for _ in range(rnd.randint(2, 8))))
    ordered = sorted(w + suffix for w in vocabulary)
    weights = [1.0 / (rank + 1) for rank in range(len(ordered))]
    rnd.shuffle(weights)
    text: list[str] = []
    pending = list(ordered)  # every word at least once
    rnd.shuffle(pending)
    for _ in range(lines):
        line = [pending.pop() for _ in range(min(len(pending), 3))]
        line += rnd.choices(ordered, weights, k=rnd.randint(1, 8))
        text.append(" ".join(w.capitalize() if rnd.random() < 0.1 else w for w in line))
    while pending:
        text.append(" ".join(pending.pop() for _ in range(min(len(pending), 8))))
    truth = Counter(word for line in text for word in line.lower().split())
    return text, truth


# -- HTTP --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: status, parsed JSON body (None if not JSON), and the headers we look at."""

    status: int
    body: Any
    served_by: str | None
    retry_after: str | None


class Client:
    """Asks instances over loopback HTTP; `keepalive=False` opens a new connection per request."""

    def __init__(self, timeout: float = 10.0, *, keepalive: bool = True) -> None:
        limits = httpx.Limits() if keepalive else httpx.Limits(max_keepalive_connections=0)
        self.http = httpx.AsyncClient(timeout=timeout, limits=limits)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get(self, base_url: str, path: str) -> Answer:
        response = await self.http.get(base_url + path)
        try:
            body = response.json()
        except ValueError:
            body = None
        return Answer(
            response.status_code, body, response.headers.get("x-served-by"), response.headers.get("retry-after")
        )

    async def ok(self, base_url: str, path: str) -> Any:
        """The body of a 200 answer; AssertionError naming the answer otherwise."""
        answer = await self.get(base_url, path)
        assert answer.status == 200, f"GET {base_url}{path}: {answer.status} {answer.body}"
        return answer.body


# -- instances ---------------------------------------------------------------------------------


@dataclass
class Instance:
    """One instance of the application: in this event loop (`streams`, `handle`) or a process."""

    name: str
    port: int
    streams: KafkaStreams | None = None
    handle: ServerHandle | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    stopped: bool = field(default=False)
    scheme: str = "http"

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.server}"

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class WordCountCluster:
    """Instances of one word-count application, each serving the REST API on its own port.

    `config` is added to every in-process instance's config (FAST_CONFIG by default);
    processes get the CLI's defaults plus `--num-standby-replicas` and `env` (STREAMS_<PROPERTY>
    variables, app/settings.py).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        tmp_path: Path,
        application_id: str,
        *,
        input_topic: str = INPUT_TOPIC,
        output_topic: str = OUTPUT_TOPIC,
        window_ms: int = WINDOW_MS,
        standby_replicas: int = 0,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        instance_config: dict[str, dict[str, Any]] | None = None,
        api_settings: ApiSettings | None = None,
        http: Callable[[float], httpx.AsyncClient] | None = None,
    ) -> None:
        """`instance_config`: more config for the in-process instances of those names; `api_settings`:
        their REST settings; `http(timeout)`: the client that checks readiness (a secured REST layer's)."""
        self.bootstrap_servers = bootstrap_servers
        self.tmp_path = tmp_path
        self.application_id = application_id
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.window_ms = window_ms
        self.standby_replicas = standby_replicas
        self.config = dict(FAST_CONFIG if config is None else config)
        self.env = dict(env or {})
        self.instance_config = dict(instance_config or {})
        self.instances: dict[str, Instance] = {}
        self.api_settings = api_settings
        self.http = http or (lambda timeout: httpx.AsyncClient(timeout=timeout))
        self.scheme = "https" if api_settings is not None and api_settings.tls is not None else "http"
        if "STREAMS_REST_SSL_CERTFILE" in self.env:
            self.scheme = "https"

    def live(self) -> list[Instance]:
        """The instances not stopped or killed, in start order."""
        return [i for i in self.instances.values() if not i.stopped]

    def by_server(self, server: str) -> Instance:
        return next(i for i in self.instances.values() if i.server == server)

    def _state_dir(self, name: str) -> Path:
        return self.tmp_path / f"state-{name}"

    async def start_in_process(self, *names: str) -> list[Instance]:
        """KafkaStreams + REST server in this event loop for each name, started together.

        Started together, they usually join the group in one generation, so the first
        assignment already spreads the tasks (the assignor is sticky: an instance that joins
        later gets the stateless tasks first). Returns once started (maybe still rebalancing).
        """
        created = [await self._create_in_process(name) for name in names]
        await asyncio.gather(*(i.streams.start() for i in created if i.streams is not None))
        return created

    async def _create_in_process(self, name: str) -> Instance:
        for _ in range(5):
            port = free_port()
            config = {
                "application.id": self.application_id,
                "bootstrap.servers": self.bootstrap_servers,
                "application.server": f"127.0.0.1:{port}",
                "state.dir": str(self._state_dir(name)),
                "num.standby.replicas": self.standby_replicas,
                **self.config,
                **self.instance_config.get(name, {}),
            }
            streams = KafkaStreams(build_topology(self.input_topic, self.output_topic, self.window_ms), config)
            try:
                handle = await serve(streams, "127.0.0.1", port, settings=self.api_settings)
            except OSError:  # someone took the port meanwhile
                await streams.close()
                continue
            instance = Instance(name, port, streams=streams, handle=handle, scheme=self.scheme)
            self.instances[name] = instance
            return instance
        raise RuntimeError("no free port for the REST server after 5 tries")

    async def start_process(self, name: str, *, ready_timeout: float = 60.0, wait_ready: bool = True) -> Instance:
        """`python -m app wordcount` (the CLI: default topics) as a child process; returns once /ready.

        `wait_ready=False` returns at once (a batch run may exit before a test sees it ready).
        A name started before gets its state directory back (a restart).
        """
        if (self.input_topic, self.output_topic) != (INPUT_TOPIC, OUTPUT_TOPIC):
            raise ValueError("the wordcount CLI reads TextLinesTopic: build the cluster with the default topics")
        logs = self.tmp_path / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            port = free_port()
            log_path = logs / f"{name}.log"
            command = [
                sys.executable, "-m", "app", "--log-level", "INFO", "wordcount",
                "--bootstrap-servers", self.bootstrap_servers,
                "--application-server", f"127.0.0.1:{port}",
                "--state-dir", str(self._state_dir(name)),
                "--application-id", self.application_id,
                "--num-standby-replicas", str(self.standby_replicas),
            ]  # fmt: skip
            with open(log_path, "ab") as log_file:
                process = subprocess.Popen(
                    command,
                    cwd=REPO_ROOT,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                )
            instance = Instance(name, port, process=process, log_path=log_path, scheme=self.scheme)
            self.instances[name] = instance
            if not wait_ready:
                return instance
            try:
                await self._wait_ready(instance, ready_timeout)
            except _PortTaken:
                del self.instances[name]
                continue
            return instance
        raise RuntimeError("no free port for the REST server after 5 tries")

    async def _wait_ready(self, instance: Instance, timeout: float) -> None:
        assert instance.process is not None
        deadline = time.monotonic() + timeout
        async with self.http(2) as http:
            while True:
                code = instance.process.poll()
                if code == 3:
                    raise _PortTaken
                if code is not None:
                    raise AssertionError(f"{instance.name} exited with {code}:\n{instance.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(instance.url + "/ready")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{instance.name} not ready in {timeout} s:\n{instance.log_tail()}")
                await asyncio.sleep(0.2)

    def kill(self, name: str) -> None:
        """SIGKILL a process instance: no commit, no leaving the group."""
        instance = self.instances[name]
        assert instance.process is not None, "only process instances can be killed"
        instance.process.send_signal(signal.SIGKILL)
        instance.process.wait(timeout=10)
        instance.stopped = True

    async def stop(self, name: str) -> None:
        """Stop one instance cleanly (in-process: close the server and the client; process: SIGTERM)."""
        instance = self.instances[name]
        if instance.stopped:
            return
        instance.stopped = True
        if instance.process is not None:
            if instance.process.poll() is None:
                instance.process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(instance.process.wait, 30)
                except subprocess.TimeoutExpired:
                    instance.process.kill()
                    instance.process.wait(timeout=10)
            return
        try:
            if instance.handle is not None:
                await instance.handle.stop()
        finally:
            if instance.streams is not None:
                await instance.streams.close(timeout=30)

    async def close(self) -> None:
        """Stop every instance (all at once, so the group does not rebalance once per instance)."""
        results = await asyncio.gather(*(self.stop(name) for name in self.instances), return_exceptions=True)
        for instance in self.instances.values():  # whatever happened, no child survives
            if instance.process is not None and instance.process.poll() is None:
                instance.process.kill()
                instance.process.wait(timeout=10)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def wait_running(self, timeout: float = 60.0) -> float:
        """Wait until every live instance answers /ready (RUNNING) and they agree on the members."""
        live = self.live()
        servers = sorted(i.server for i in live)

        async def settled() -> bool:
            async with self.http(2) as http:
                for instance in live:
                    if instance.streams is not None and instance.streams.state is not State.RUNNING:
                        return False
                    try:
                        ready = await http.get(instance.url + "/ready")
                        members = await http.get(instance.url + "/state/instances")
                    except httpx.HTTPError:
                        return False
                    if ready.status_code != 200 or members.status_code != 200:
                        return False
                    if sorted(f"{m['host']}:{m['port']}" for m in members.json()) != servers:
                        return False
            return True

        return await wait_until(settled, timeout, lambda: f"instances {servers} RUNNING and agreeing", 0.25)


class _PortTaken(Exception):
    """The child process exited with the service's 'port taken' code (3)."""


class InstanceTasks:
    """One task per instance (a poller asking through it), cancelled when the instance goes or the test ends."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        self._tasks[name] = asyncio.get_running_loop().create_task(work)

    async def drop(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def stop(self) -> None:
        for name in list(self._tasks):
            await self.drop(name)
