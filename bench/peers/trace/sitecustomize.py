"""Traces where `run_ours.py`'s stream thread waits: imported by Python at start-up (sitecustomize).

    mkdir -p /tmp/trace && WCC_TRACE=/tmp/trace PYTHONPATH=bench/peers/trace flock /tmp/bench.lock \
        .venv/bin/python bench/peers/harness.py --lines 50000 --rounds 1 --systems ours-alos --workloads wc-cache
    .venv/bin/python bench/peers/trace/analyze.py /tmp/trace [bucket seconds]

Only in a process started as run_ours.py with WCC_TRACE set: wraps (by monkeypatching, once the
stream thread's module is imported) the event loop's `select` (time blocked, by what the thread
was awaiting), aiokafka's fetch requests (partitions asked, which returned records, duration),
the port's `getmany`, flow control, `TaskManager.process`, `send_pending`, deliveries and commits,
and writes the events to WCC_TRACE/<pid>.json at exit. The tracing costs about 10% of CPU.
"""
import os
import sys

if os.environ.get("WCC_TRACE") and sys.argv and sys.argv[0].endswith("run_ours.py"):
    import atexit
    import json
    import selectors
    import time

    T0 = time.perf_counter()
    EV: list = []
    STATE = ["other"]
    IDLE: dict = {}
    CPU: list = []
    BUSY: dict = {}

    def now() -> float:
        return time.perf_counter() - T0

    _orig_select = selectors.EpollSelector.select

    def select(self, timeout=None):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        r = _orig_select(self, timeout)
        d = time.perf_counter() - t
        IDLE[STATE[0]] = IDLE.get(STATE[0], 0.0) + d
        if d > 0.002:
            EV.append(("idle", now() - d, d, STATE[0]))
        CPU.append((now(), time.process_time()))
        return r

    selectors.EpollSelector.select = select

    def dump() -> None:
        path = os.path.join(os.environ["WCC_TRACE"], f"{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump({"events": EV, "idle": IDLE, "cpu": CPU[::50] + CPU[-1:]}, f)

    atexit.register(dump)

    def patch() -> None:
        from aiokafka.consumer import fetcher as F

        orig_fetch = F.Fetcher._proc_fetch_request

        async def proc_fetch(self, assignment, node_id, request):  # type: ignore[no-untyped-def]
            t = now()
            tps = [f"{topic[-12:]}-{p}" for topic, parts in request.topics for p, _, _ in parts]
            r = await orig_fetch(self, assignment, node_id, request)
            got = {}
            for tp, res in self._records.items():
                if type(res) is F.FetchResult and res._created >= time.monotonic() - (now() - t):
                    got[f"{tp.topic[-12:]}-{tp.partition}"] = 1
            EV.append(("fetch", t, now() - t, tps, sorted(got)))
            return r

        F.Fetcher._proc_fetch_request = proc_fetch

        from streams_core.clients import aiokafka_supplier as S

        orig_getmany = S.AioKafkaConsumer.getmany

        async def getmany(self, *partitions, timeout_ms=0, max_records=None):  # type: ignore[no-untyped-def]
            t = now()
            prev, STATE[0] = STATE[0], f"getmany{'0' if not timeout_ms else '>0'}"
            try:
                r = await orig_getmany(self, *partitions, timeout_ms=timeout_ms, max_records=max_records)
            finally:
                STATE[0] = prev
            if self._consumer._group_id is not None:
                counts = {}
                for tp, recs in r.items():
                    k = "rep" if "repartition" in tp.topic else "in"
                    counts[k] = counts.get(k, 0) + len(recs)
                    tn = type(recs[0]).__name__
                    IDLE["type_" + tn] = IDLE.get("type_" + tn, 0) + len(recs)
                EV.append(("getmany", t, now() - t, timeout_ms, counts, len(self._paused)))
            return r

        S.AioKafkaConsumer.getmany = getmany

        from streams_core.runtime.tasks import flow_control as FC

        orig_apply = FC.FlowControl.apply

        def apply(self, tasks):  # type: ignore[no-untyped-def]
            p, r = self.pause_count, self.resume_count
            orig_apply(self, tasks)
            if self.pause_count != p or self.resume_count != r:
                EV.append(("flow", now(), self.pause_count - p, self.resume_count - r))

        FC.FlowControl.apply = apply

        from streams_core.runtime.threads import stream_thread as ST

        orig_commit = ST.StreamThread.commit

        async def commit(self):  # type: ignore[no-untyped-def]
            t = now()
            prev, STATE[0] = STATE[0], "commit"
            try:
                await orig_commit(self)
            finally:
                STATE[0] = prev
            EV.append(("commit", t, now() - t))

        ST.StreamThread.commit = commit

        orig_let = ST._let_others_run

        async def let_others_run():  # type: ignore[no-untyped-def]
            prev, STATE[0] = STATE[0], "yield"
            try:
                await orig_let()
            finally:
                STATE[0] = prev

        ST._let_others_run = let_others_run

        from streams_core.runtime.tasks import task_manager as TM

        orig_process = TM.TaskManager.process

        def process(self, max_records, now_ms, slice_s=None):  # type: ignore[no-untyped-def]
            t = now()
            n = orig_process(self, max_records, now_ms, slice_s)
            EV.append(("process", t, now() - t, n))
            return n

        TM.TaskManager.process = process

        from streams_core.runtime.tasks import record_collector_impl as RC

        orig_sp = RC.RecordCollectorImpl.send_pending

        async def send_pending(self):  # type: ignore[no-untyped-def]
            t = now()
            n = len(self._pending)
            prev, STATE[0] = STATE[0], "send_pending"
            try:
                await orig_sp(self)
            finally:
                STATE[0] = prev
            if n:
                EV.append(("send", t, now() - t, n))

        RC.RecordCollectorImpl.send_pending = send_pending

        orig_deliv = RC.RecordCollectorImpl._on_delivery

        def on_delivery(self, records, future):  # type: ignore[no-untyped-def]
            if not future.cancelled() and future.exception() is None:
                md = future.result()
                EV.append(("ack", now(), records, "rep" if "repartition" in md.topic else md.topic[-8:]))
            orig_deliv(self, records, future)

        RC.RecordCollectorImpl._on_delivery = on_delivery

    import importlib.abc
    import importlib.util

    class _Hook(importlib.abc.MetaPathFinder):
        done = False

        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name == "streams_core.runtime.threads.stream_thread" and not self.done:
                self.done = True
                sys.meta_path.remove(self)
                spec = importlib.util.find_spec(name)
                loader = spec.loader
                orig_exec = loader.exec_module

                def exec_module(module):  # type: ignore[no-untyped-def]
                    orig_exec(module)
                    patch()

                loader.exec_module = exec_module
                return spec
            return None

    sys.meta_path.insert(0, _Hook())
