"""run: an application instance with its REST server, in one call, until SIGINT or SIGTERM.

    streams = KafkaStreams(topology, {..., "application.server": "127.0.0.1:7070"})
    api.run(streams)                      # blocks; `await api.serve_until_signal(streams)` in a loop

The REST server listens first (a busy port fails before anything starts), then the instance
starts (`KafkaStreams.run_until_signal`); on SIGINT/SIGTERM, or when the instance ends (ERROR,
or a finished batch run), the instance closes cleanly (commit, checkpoint, leave the group) and
then the server stops, so queries are answered (503 while closing) until the end.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from typing import Any

from api.server import DEFAULT_HOST, serve
from api.settings import ApiSettings
from streams_core import KafkaStreams

__all__ = ["run", "serve_until_signal"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 30.0


def _freeze_start_up() -> None:
    """What start-up made (modules, the REST app's models, clients) lives while the instance runs;
    frozen, the full collections, which pause the event loop and so every query, stay a few ms."""
    gc.collect()
    gc.freeze()


async def serve_until_signal(
    streams: KafkaStreams,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    *,
    settings: ApiSettings | None = None,
    close_timeout: float = CLOSE_TIMEOUT_S,
) -> None:
    """Serve the REST API of `streams` (see `api.serve`: `port` defaults to application.server's),
    start it, and wait for SIGINT/SIGTERM or its end; then close it and stop the server.

    `api.server.BindError` (an OSError) when the address cannot be bound, before anything starts;
    an error of `streams.start()` (a missing source topic, a state directory in use) is raised
    once the instance is closed and the server stopped.
    """
    server = await serve(streams, host, port, settings=settings)
    loop = asyncio.get_running_loop()
    if server.tls:  # certificate rotation: write the new files, then `kill -HUP <pid>`
        loop.add_signal_handler(signal.SIGHUP, server.reload_tls)

    froze = False

    def started() -> None:
        nonlocal froze
        _freeze_start_up()
        froze = True
        log.info("%s serving queries on %s", streams.application_id, server.url)

    try:
        await streams.run_until_signal(on_started=started, close_timeout=close_timeout)
    finally:
        if server.tls:
            loop.remove_signal_handler(signal.SIGHUP)
        await server.stop()
        if froze:  # the instance and its server are garbage once dropped, also in a process that goes on
            gc.unfreeze()


def run(streams: KafkaStreams, host: str = DEFAULT_HOST, port: int | None = None, **options: Any) -> None:
    """`serve_until_signal(streams, host, port, **options)` in a new event loop: blocks until
    SIGINT/SIGTERM, then returns after a clean shutdown (check `streams.state`: ERROR when the
    instance failed, `streams.errors` says why)."""
    asyncio.run(serve_until_signal(streams, host, port, **options))
