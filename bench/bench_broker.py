"""The local broker and the work directory of one benchmark run, shared by the bench scripts.

`bench_broker()` starts a LocalKafkaBroker and stops it on the way out, even on an error or a
SIGTERM (what `timeout` sends, made to unwind as Ctrl-C does). Its JVM runs with the C2 compiler
unless `c2=False`: the launcher's `-XX:TieredStopAtLevel=1` starts faster (what tests want) but
runs a long benchmark slower. `work_dir()` is a run's scratch directory, removed at the end
unless kept (`--keep`: logs and state to look at).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

from streams_core.broker import DEFAULT_JVM_OPTS, LocalKafkaBroker

__all__ = ["bench_broker", "work_dir"]


@contextlib.contextmanager
def bench_broker(data_dir: str | Path | None = None, *, c2: bool = True) -> Iterator[LocalKafkaBroker]:
    """A started broker in `data_dir` (None: a temporary directory, removed after); prints its address.

    Call it from the main thread: it installs the SIGTERM handler, and the broker's JVM dies with
    the thread that started it (PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    jvm_opts = [o for o in DEFAULT_JVM_OPTS if not (c2 and o.startswith("-XX:TieredStopAtLevel"))]
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-broker-"))
        broker = stack.enter_context(LocalKafkaBroker(data_dir, jvm_opts=jvm_opts))
        print(f"broker {broker.bootstrap_servers} up in {broker.startup_seconds or 0:.1f} s", flush=True)
        yield broker


@contextlib.contextmanager
def work_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A new temporary directory, removed at the end unless `keep` (then its path is printed)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            print(f"work directory kept: {path}", flush=True)
        else:
            shutil.rmtree(path, ignore_errors=True)
