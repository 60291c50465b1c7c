"""Run a client until SIGINT/SIGTERM or its own end, then close it: `KafkaStreams.run_until_signal`'s loop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["run_until_signal"]


async def run_until_signal(
    start: Callable[[], Awaitable[None]],
    ended: Callable[[], Awaitable[Any]],
    close: Callable[[], Awaitable[Any]],
    on_started: Callable[[], None] | None = None,
) -> None:
    """`start()`, wait for SIGINT/SIGTERM or `ended()`, then `close()`; the handlers stay until the close is
    done, so a second signal during it cannot cancel the final commit."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        await start()
        if on_started is not None:
            on_started()
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(ended())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
    finally:
        try:
            await close()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
