"""LocalKafkaBroker: one local single-node Kafka broker (KRaft, broker+controller in one JVM).

The demo, ``python -m app`` without ``--bootstrap-servers``, the benchmarks and tests run it.

The broker runs from the Maven Central jars that ``make setup`` copies into
``.cache/kafka-<version>/libs``; no Kafka distribution, Docker or ZooKeeper is needed.

Usage::

    with LocalKafkaBroker(data_dir="/tmp/k") as broker:
        broker.bootstrap_servers        # "127.0.0.1:<port>"

or from a shell (prints ``READY 127.0.0.1:<port>`` once a client can connect, stops on
SIGTERM/SIGINT)::

    python -m streams_core.broker --port 0 --data-dir /tmp/k

The JVM can never outlive its Python parent: it is started with ``PR_SET_PDEATHSIG=SIGKILL``
(so even ``kill -9`` of Python kills it), in its own process group (a terminal's Ctrl-C reaches
only Python, which then stops the broker cleanly), and an ``atexit`` handler stops any broker
still running.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from streams_core.broker.installation import BrokerError, check_logging_backend, find_kafka_libs, java_executable
from streams_core.broker.probe import probe_metadata
from streams_core.broker.process import HOST, bindable, first_errors, free_port, preexec_child, signal_group, tail
from streams_core.broker.security import BrokerSecurity, SecurityMaterial
from streams_core.broker.server_config import (
    DEFAULT_JVM_OPTS,
    ENV_JVM_OPTS,
    java_property,
    log4j2_properties,
    properties_text,
    random_cluster_id,
    server_properties,
)

__all__ = ["DEFAULT_JVM_OPTS", "BrokerError", "LocalKafkaBroker"]

log = logging.getLogger(__name__)

_live_brokers: set[LocalKafkaBroker] = set()
_live_lock = threading.Lock()


class LocalKafkaBroker:
    """One local KRaft Kafka broker (combined broker+controller) in a child JVM.

    ``start()`` formats the storage when needed, starts the JVM and blocks until a Kafka
    MetadataRequest succeeds; ``stop()`` sends SIGTERM, waits, then SIGKILLs. A data dir that
    already holds formatted storage is reused (topics survive a restart) unless ``fresh``.

    PR_SET_PDEATHSIG fires when the *thread* that started the JVM exits: call ``start()`` from a
    long-lived thread (the main thread, or the event loop's thread), not a throw-away one.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        *,
        controller_port: int = 0,
        libs_dir: str | os.PathLike[str] | None = None,
        auto_create_topics: bool = False,
        fresh: bool = False,
        overrides: Mapping[str, str | int | bool] | None = None,
        jvm_opts: Sequence[str] | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 20.0,
        security: BrokerSecurity | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.security = security
        self.material = SecurityMaterial(security, self.data_dir) if security is not None else None
        #: Port of each client listener by name (its security protocol), once started.
        self.listener_ports: dict[str, int] = {}
        self._requested_port = port
        self._requested_controller_port = controller_port
        self._libs_dir = Path(libs_dir).resolve() if libs_dir is not None else None
        self.auto_create_topics = auto_create_topics
        self.fresh = fresh
        self.overrides: dict[str, str] = {k: java_property(v) for k, v in (overrides or {}).items()}
        if jvm_opts is None:
            env_opts = os.environ.get(ENV_JVM_OPTS)
            jvm_opts = env_opts.split() if env_opts else DEFAULT_JVM_OPTS
        self.jvm_opts: list[str] = list(jvm_opts)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.controller_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    # -- paths -------------------------------------------------------------------------------
    @property
    def log_dir(self) -> Path:
        """Kafka's ``log.dirs`` (topic data and the KRaft metadata log)."""
        return self.data_dir / "kafka-data"

    @property
    def server_log(self) -> Path:
        """The broker's log4j2 log file."""
        return self.data_dir / "server.log"

    @property
    def console_log(self) -> Path:
        """The JVM's stdout and stderr (early failures, before logging is set up)."""
        return self.data_dir / "jvm-console.log"

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>`` of the running broker (its first listener)."""
        if self.port is None:
            raise BrokerError("the broker is not started")
        return f"{HOST}:{self.port}"

    def listener(self, protocol: str) -> str:
        """``127.0.0.1:<port>`` of the listener with this security protocol."""
        if protocol not in self.listener_ports:
            raise BrokerError(f"no {protocol} listener (listeners: {', '.join(self.listener_ports) or 'none yet'})")
        return f"{HOST}:{self.listener_ports[protocol]}"

    def client_config(
        self, protocol: str | None = None, *, user: str | None = None, mechanism: str | None = None
    ) -> dict[str, Any]:
        """StreamsConfig properties (``bootstrap.servers`` and the security ones) to connect as ``user``.

        Without ``user``: the super user (SASL) or the broker's own certificate (SSL), for set-up.
        See ``SecurityMaterial.client_properties``.
        """
        protocol = protocol or next(iter(self.listener_ports), "PLAINTEXT")
        props: dict[str, Any] = {"bootstrap.servers": self.listener(protocol)}
        if self.material is not None:
            props |= self.material.client_properties(protocol, user=user, mechanism=mechanism)
        return props

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        return self.process.pid if self.process is not None else None

    def is_running(self) -> bool:
        """True while the JVM process is alive."""
        return self.process is not None and self.process.poll() is None

    # -- configuration -----------------------------------------------------------------------
    def server_properties(self) -> dict[str, str]:
        """The broker's ``server.properties``: single node, loopback only, fast to start."""
        assert self.port is not None and self.controller_port is not None
        props = server_properties(
            HOST, self.port, self.controller_port, self.log_dir, auto_create_topics=self.auto_create_topics
        )
        if self.material is not None:
            ports = self.listener_ports | {"CONTROLLER": self.controller_port}
            props |= self.material.server_properties(ports, HOST)
        props.update(self.overrides)
        return props

    def _write_configs(self) -> Path:
        props_file = self.data_dir / "server.properties"
        props_file.write_text(properties_text(self.server_properties()))
        (self.data_dir / "log4j2.properties").write_text(log4j2_properties(self.server_log))
        return props_file

    def _classpath(self, libs: Path) -> str:
        return str(libs / "*")

    def _java_cmd(self, libs: Path, main_class: str, *args: str) -> list[str]:
        log4j = self.data_dir / "log4j2.properties"
        return [
            java_executable(),
            *self.jvm_opts,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp",
            self._classpath(libs),
            main_class,
            *args,
        ]

    def _format_storage(self, libs: Path, props_file: Path) -> None:
        """Format KRaft storage once (``StorageTool format``) with a fresh cluster id."""
        if (self.log_dir / "meta.properties").exists():
            log.info("reusing formatted storage in %s", self.log_dir)
            return
        cluster_id = random_cluster_id()
        scram = self.material.format_arguments() if self.material is not None else []
        cmd = self._java_cmd(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props_file), *scram)
        log.info("formatting KRaft storage in %s (cluster id %s)", self.log_dir, cluster_id)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, check=False)
        if proc.returncode != 0:
            output = proc.stdout.decode(errors="replace")[-4000:]
            for secret in self._secrets():
                output = output.replace(secret, "***")
            raise BrokerError(f"kafka.tools.StorageTool format failed ({proc.returncode}):\n{output}")

    def _secrets(self) -> list[str]:
        """Passwords this broker was configured with: kept out of its error messages."""
        if self.material is None or self.security is None:
            return []
        return [self.material.super_password, *self.security.scram_users.values(), *self.security.plain_users.values()]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Self:
        """Start the broker and block until it answers a MetadataRequest (or raise BrokerError)."""
        if self.is_running():
            return self
        libs = self._libs_dir or find_kafka_libs()
        check_logging_backend(libs)
        # Ports picked here may be grabbed by someone else before the JVM binds them: retry.
        auto_ports = self._requested_port == 0 and self._requested_controller_port == 0
        attempts = 3 if auto_ports else 1
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(libs, retry_on_bind_error=attempt < attempts)
                return self
            except _PortTaken as exc:
                log.warning("%s; retrying with other free ports", exc)
        raise AssertionError("unreachable")

    def _start_once(self, libs: Path, retry_on_bind_error: bool) -> None:
        began = time.monotonic()
        if self.fresh and self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self._requested_port or free_port()
        names = self.security.listeners if self.security is not None else ("PLAINTEXT",)
        self.listener_ports = {names[0]: self.port}
        for name in names[1:]:
            self.listener_ports[name] = free_port()
        self.controller_port = self._requested_controller_port or free_port()
        while len({self.controller_port, *self.listener_ports.values()}) != len(names) + 1:
            self.controller_port = free_port()
            self.listener_ports |= {n: free_port() for n in names[1:]}
        if self.material is not None:
            self.material.prepare()
        props_file = self._write_configs()
        self._format_storage(libs, props_file)
        cmd = self._java_cmd(libs, "kafka.Kafka", str(props_file))
        log.info("starting Kafka broker on %s:%s (controller %s)", HOST, self.port, self.controller_port)
        with open(self.console_log, "ab") as console:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                preexec_fn=preexec_child,
                close_fds=True,
            )
        with _live_lock:
            _live_brokers.add(self)
        try:
            self._wait_ready(began, retry_on_bind_error)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("Kafka broker ready at %s in %.1f s", self.bootstrap_servers, self.startup_seconds)

    def _wait_ready(self, began: float, retry_on_bind_error: bool) -> None:
        assert self.process is not None and self.port is not None
        deadline = began + self.start_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                diagnostics = self.diagnostics()
                lost_port = "Address already in use" in diagnostics or not all(
                    bindable(p) for p in (self.controller_port, *self.listener_ports.values())
                )
                if retry_on_bind_error and lost_port:
                    raise _PortTaken(f"port {self.port} or {self.controller_port} is taken")
                raise BrokerError(
                    f"the Kafka broker on {HOST}:{self.port} (controller port "
                    f"{self.controller_port}) exited with code {code} during start-up.\n" + diagnostics
                )
            try:
                if self._probe() > 0:
                    return
            except OSError as exc:
                last_error = exc
            time.sleep(0.1)
        raise BrokerError(
            f"the Kafka broker did not become ready within {self.start_timeout:.0f} s "
            f"(last probe error: {last_error!r}).\n" + self.diagnostics()
        )

    def _probe(self) -> int:
        """A MetadataRequest on the first listener, as the super user where it needs credentials."""
        assert self.port is not None
        if self.material is None or self.security is None:
            return probe_metadata(HOST, self.port, timeout=2.0)
        protocol = self.security.listeners[0]
        context = self.material.ssl_context() if protocol in ("SSL", "SASL_SSL") else None
        plain = (self.security.super_user, self.material.super_password) if protocol.startswith("SASL_") else None
        return probe_metadata(HOST, self.port, timeout=2.0, ssl_context=context, sasl_plain=plain)

    def diagnostics(self) -> str:
        """First errors and the tails of the broker log and the JVM console, for error messages."""
        errors = first_errors(self.server_log)
        return (
            (f"--- first errors in {self.server_log} ---\n{errors}\n" if errors else "")
            + f"--- tail of {self.server_log} ---\n{tail(self.server_log, 15)}\n"
            f"--- tail of {self.console_log} ---\n{tail(self.console_log)}"
        )

    def stop(self) -> int | None:
        """Stop the JVM: SIGTERM (clean shutdown), wait ``stop_timeout``, then SIGKILL.

        Returns the JVM's exit code (None if it was not started). Safe to call twice.
        """
        proc = self.process
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                log.info("stopping Kafka broker (pid %s)", proc.pid)
                signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    log.warning("Kafka broker did not stop in %.0f s: SIGKILL", self.stop_timeout)
                    signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            return proc.returncode
        finally:
            with _live_lock:
                _live_brokers.discard(self)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"LocalKafkaBroker({HOST}:{self.port}, {self.data_dir}, {state})"


class _PortTaken(Exception):
    """The JVM could not bind a port that was free a moment before."""


@atexit.register
def _stop_all_at_exit() -> None:
    """Never leave a broker JVM behind when the interpreter exits."""
    with _live_lock:
        brokers = list(_live_brokers)
    for broker in brokers:
        broker.stop_timeout = min(broker.stop_timeout, 10.0)
        try:
            broker.stop()
        except Exception:
            log.exception("could not stop %r at exit", broker)
