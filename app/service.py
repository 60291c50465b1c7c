"""Running a topology as a service: Kafka checks, topics, then `api.serve_until_signal` (the
instance with its REST server until SIGINT/SIGTERM), with a local broker when none is given.

Exit codes: 0 after SIGINT/SIGTERM; 2 when Kafka cannot be reached; 3 when the REST port is
taken; 4 when the application fails (its error is logged); 5 when the REST layer's TLS or
credentials files cannot be used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from api import BindError, serve_until_signal
from app.settings import ServiceSettings
from streams_core import KafkaStreams, State, StreamThreadExceptionResponse, Topology, WorkerDiedError, clients
from streams_core.broker import LocalKafkaBroker
from streams_core.tools.topics import KafkaUnreachableError, admin_client

__all__ = ["ServiceError", "run_service"]

log = logging.getLogger(__name__)

EXIT_KAFKA_UNREACHABLE = 2
EXIT_PORT_TAKEN = 3
EXIT_APP_FAILED = 4
EXIT_BAD_SETTINGS = 5


class ServiceError(Exception):
    """A start-up failure with the exit code and the message a person should read."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def _ensure_topics(config: Mapping[str, Any], topics: Mapping[str, int], timeout: float) -> None:
    """Create the app's own input/output topics if missing; ServiceError if Kafka does not answer."""
    specs = [clients.NewTopicSpec(name, partitions) for name, partitions in topics.items()]
    try:
        async with admin_client(config, timeout) as admin:
            created = await clients.InternalTopicManager(admin).ensure_topics(specs)
    except KafkaUnreachableError as exc:
        raise ServiceError(
            EXIT_KAFKA_UNREACHABLE, f"{exc}; check --bootstrap-servers or leave it out to start a local broker"
        ) from exc
    if created:
        log.info("created topics %s", created)


def replace_dead_workers(error: BaseException) -> StreamThreadExceptionResponse:
    """The service's uncaught-exception handler: a stream thread whose worker process died (killed,
    out of memory) is replaced; any other error shuts the client down, Kafka Streams' default (a
    processing error would only come back in a new thread)."""
    if isinstance(error, WorkerDiedError):
        return StreamThreadExceptionResponse.REPLACE_THREAD
    return StreamThreadExceptionResponse.SHUTDOWN_CLIENT


async def _serve(
    settings: ServiceSettings,
    topology_factory: Callable[[], Topology],
    topics: Mapping[str, int],
    extra_config: Mapping[str, Any],
    bootstrap: str,
) -> None:
    config = {
        "application.id": settings.application_id,
        "bootstrap.servers": bootstrap,
        "application.server": settings.application_server,
        "state.dir": settings.state_dir,
        "num.standby.replicas": settings.num_standby_replicas,
        "processing.guarantee": settings.processing_guarantee,
        "autostop.at": settings.autostop_at,
        **settings.properties,
        **extra_config,
    }
    try:
        api_settings = settings.rest.api_settings(settings.query_deadline_ms / 1000)
    except (OSError, ValueError) as exc:
        raise ServiceError(EXIT_BAD_SETTINGS, f"REST security: {exc}") from None
    await _ensure_topics(config, topics, timeout=15)
    streams = KafkaStreams(topology_factory(), config)
    streams.set_uncaught_exception_handler(replace_dead_workers)
    try:
        await serve_until_signal(streams, settings.bind_host, settings.port, settings=api_settings)
    except BindError as exc:
        raise ServiceError(
            EXIT_PORT_TAKEN, f"cannot serve queries on {settings.bind_host}:{settings.port}: {exc.strerror or exc}"
        ) from exc
    if streams.state is State.ERROR:
        raise ServiceError(EXIT_APP_FAILED, f"{settings.application_id} failed: {streams.errors[-1]!r}")


@contextlib.contextmanager
def kafka_bootstrap(settings: ServiceSettings) -> Iterator[str]:
    """The bootstrap servers of the settings, or those of a local broker started (and stopped) here."""
    if settings.bootstrap_servers:
        yield settings.bootstrap_servers
        return
    broker = LocalKafkaBroker(Path(settings.state_dir) / "local-kafka", port=0)
    broker.start()
    log.info("started a local Kafka broker at %s", broker.bootstrap_servers)
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def run_service(
    settings: ServiceSettings,
    topology_factory: Callable[[], Topology],
    topics: Mapping[str, int],
    extra_config: Mapping[str, Any] | None = None,
) -> int:
    """Run until SIGINT/SIGTERM; start a local broker first when no bootstrap servers are given."""
    try:
        with kafka_bootstrap(settings) as bootstrap:
            asyncio.run(_serve(settings, topology_factory, topics, extra_config or {}, bootstrap))
        return 0
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
