"""Where the stream threads run, chosen once from `stream.threads.mode` (docs/runtime.md).

- `auto` (the default): `process` for two threads or more, `inline` for one (see `in_process`).
- `inline`: each stream thread is an asyncio task on the instance's event loop (`StreamThread`),
  which the instance's global thread and REST server share: one core, whatever
  `num.stream.threads` says.
- `process`: each stream thread runs in a worker process of its own (`WorkerThread`, running
  `stream_worker.py`), so N threads use N cores; the instance's process keeps the state machine,
  the REST server and discovery, and reads stores through the workers' query channels. Each
  worker has its own global thread when the topology has global stores.

Batch runs (`autostop.at`) and pattern subscriptions keep their threads inline: both are
coordinated by the instance's process today (the run's metadata topic, the pattern watcher).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError
from streams_core.runtime.autostop.run_end import RunEnd
from streams_core.runtime.threads.instance_thread import InstanceThread, ThreadCallbacks, ThreadFactory
from streams_core.runtime.threads.stream_thread_factory import StreamThreadFactory
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.runtime.workers.worker_thread import WorkerThread, WorkerThreadFactory

__all__ = ["in_process", "remote_global_stores", "thread_factory"]


def in_process(config: StreamsConfig, metadata: TopologyMetadata, *, own_supplier: bool) -> bool:
    """Whether the threads run on the instance's loop; ConfigError for what process mode cannot run.

    `auto` (the default) runs several threads as workers and one inline (a worker gains a lone
    thread nothing: bench/README.md), and keeps threads inline for batch runs, pattern
    subscriptions and a client supplier of the user's own (`own_supplier`: it may hold state of
    this process, as the tests' fake supplier does); `process` asks for workers in any case.
    """
    mode = config["stream.threads.mode"]
    if mode == "inline":
        return True
    if mode == "auto":
        return (
            config["num.stream.threads"] == 1 or own_supplier or config["autostop.at"] is not None or metadata.has_patterns
        )
    if config["autostop.at"] is not None:
        raise ConfigError("stream.threads.mode", "'process' does not run batch runs (autostop.at): use 'inline'")
    if metadata.has_patterns:
        raise ConfigError("stream.threads.mode", "'process' does not follow pattern subscriptions: use 'inline'")
    return False


def thread_factory(
    metadata: TopologyMetadata,
    config: StreamsConfig,
    *,
    inline: bool,
    process_id: str,
    client_supplier: clients.KafkaClientSupplier,
    global_stores: Callable[[], Mapping[str, Any]],
    run_end: RunEnd,
    partition_counts: Callable[[], Mapping[str, int]],
    key_serde: Callable[[str], Any],
    callbacks: ThreadCallbacks,
) -> ThreadFactory:
    """The factory of the instance's threads: in-process `StreamThread`s or `WorkerThread`s."""
    if inline:
        return StreamThreadFactory(
            metadata, config, process_id=process_id, client_supplier=client_supplier, global_stores=global_stores,
            run_end=run_end, callbacks=callbacks,
        )
    return WorkerThreadFactory(
        metadata, config, process_id=process_id, client_supplier=client_supplier, partition_counts=partition_counts,
        key_serde=key_serde, callbacks=callbacks,
    )


def remote_global_stores(threads: Sequence[InstanceThread], names: Iterable[str]) -> dict[str, Any]:
    """The global stores of the first running worker (each worker holds all of each); none while no
    worker runs, so a query is not answered from a copy still bootstrapping."""
    for thread in threads:
        if isinstance(thread, WorkerThread) and thread.state is ThreadState.RUNNING:
            return {name: thread.store_provider.global_store(name) for name in names}
    return {}
