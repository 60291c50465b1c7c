"""Summarizes a trace of bench/peers/trace/sitecustomize.py: where the stream thread's time went.

    .venv/bin/python bench/peers/trace/analyze.py TRACE_DIR [BUCKET_S]

The window runs from the first record sent to a repartition or output topic (the harness's
"first write") to the end of the commit that follows the last processed record. Prints the time
in each wrapped call, the time the event loop blocked by what the thread awaited, the CPU time in
the window, the fetches the broker held over 100 ms, and with BUCKET_S a timeline per bucket.
"""

from __future__ import annotations

import collections
import glob
import json
import sys
from typing import Any


def main(directory: str, bucket: float | None) -> None:
    for path in sorted(glob.glob(f"{directory}/*.json")):
        summarize(json.load(open(path)), bucket)


def summarize(trace: dict[str, Any], bucket: float | None) -> None:
    ev = trace["events"]
    first = min(e[1] for e in ev if e[0] == "send")
    last = max(e[1] + e[2] for e in ev if e[0] == "process" and e[3])
    after = [e for e in ev if e[0] == "commit" and e[1] >= last][:1]
    end = after[0][1] + after[0][2] if after else last
    print(f"first send {first:.3f} s, last record processed {last:.3f} s, the commit after it ends {end:.3f} s: "
          f"window {end - first:.3f} s (processing {last - first:.3f} s)")
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    idle: collections.Counter[str] = collections.Counter()
    for e in ev:
        if first <= e[1] <= end:
            if e[0] in ("getmany", "process", "commit", "send"):
                key = e[0] + (f" timeout={e[3]}" if e[0] == "getmany" else "")
                total[key] += e[2]
                count[key] += 1
            elif e[0] == "idle":
                idle[e[3]] += e[2]
    for key in sorted(total):
        print(f"  {key:22s} {count[key]:6d} calls {total[key]:7.3f} s")
    print("  event loop blocked (>2 ms) while the thread awaited:", {k: round(v, 3) for k, v in idle.items()})
    cpu = trace.get("cpu", [])
    if cpu:
        c0 = min(cpu, key=lambda c: abs(c[0] - first))
        c1 = min(cpu, key=lambda c: abs(c[0] - end))
        print(f"  CPU {c1[1] - c0[1]:.3f} s over {c1[0] - c0[0]:.3f} s of the window")
    held = [(round(e[1], 2), round(e[2], 2), e[3]) for e in ev if e[0] == "fetch" and first <= e[1] <= end and e[2] > 0.1]
    print(f"  fetches held over 100 ms: {len(held)}", *held, sep="\n    ")
    types = {k.removeprefix("type_"): v for k, v in trace["idle"].items() if k.startswith("type_")}
    print("  record types returned:", types)
    if bucket:
        timeline(ev, first, last, bucket)


def timeline(ev: list[Any], first: float, last: float, width: float) -> None:
    rows: dict[float, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for e in ev:
        row = rows[int(e[1] / width) * width]
        if e[0] == "getmany":
            for topic, n in e[4].items():
                row[topic] += n
            row["getmany_ms"] += e[2] * 1000
        elif e[0] == "process":
            row["processed"] += e[3]
            row["process_ms"] += e[2] * 1000
        elif e[0] == "send":
            row["send_ms"] += e[2] * 1000
        elif e[0] == "commit":
            row["commit_ms"] += e[2] * 1000
        elif e[0] == "idle":
            row["idle_ms " + e[3]] += e[2] * 1000
        elif e[0] == "fetch":
            row["fetches"] += 1
    for at in sorted(rows):
        if first - width <= at <= last + width:
            print(f"  {at:6.2f}", {k: int(v) for k, v in rows[at].items()})


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)
