"""Full-size buffer runs (issue 35, item 7): suppression and join grace buffers under kill -9.

Starts its own local broker in a temp dir (stopped at the end) and runs the scenarios of
tests/chaos/buffer_kills.py at the sizes given: a suppressed windowed count killed `--kills`
times under exactly-once and at-least-once, and a versioned stream-table join with grace through
a task migration and `--join-kills` kills. Prints each scenario's figures; exit code 1 if any
found something wrong (the seed is printed; `--seed` replays the kill plan).

    flock /tmp/bench.lock .venv/bin/python bench/chaos/buffers.py suppress-eos suppress-alos join
    .venv/bin/python bench/chaos/buffers.py suppress-eos --seconds 60 --kills 3     # the test's size
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams_core.broker import LocalKafkaBroker
from tests.chaos.buffer_kills import BufferReport, join_migration_and_kills, suppress_kills

SCENARIOS = ("suppress-eos", "suppress-alos", "join")


async def _run(name: str, args: argparse.Namespace, bootstrap: str, work: Path, seed: int) -> BufferReport:
    if name == "join":
        return await join_migration_and_kills(bootstrap, work / name, records=args.join_records, kills=args.join_kills, seed=seed)
    guarantee = "exactly_once" if name == "suppress-eos" else "at_least_once"
    return await suppress_kills(bootstrap, work / name, guarantee, seconds=args.seconds, kills=args.kills, seed=seed)


async def _main(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    work = Path(tempfile.mkdtemp(prefix="chaos-buffers-"))
    broker = LocalKafkaBroker(work / "broker", port=0)
    broker.start()
    reports: list[BufferReport] = []
    try:
        for name in args.scenarios:
            print(f"== {name} (seed {seed})", flush=True)
            report = await _run(name, args, broker.bootstrap_servers, work, seed)
            reports.append(report)
            print(f"{report.figures} kills: {report.kills}", flush=True)
            for problem in report.problems:
                print(f"!! {name} (seed {seed}): {problem}", flush=True)
    finally:
        broker.stop()
        if any(r.problems for r in reports):
            print(f"logs and state kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| scenario | seed | kills | figures | problems |\n|---|---|---|---|---|")
    for r in reports:
        print(f"| {r.scenario} | {r.seed} | {len(r.kills)} | {r.figures} | {len(r.problems)} |")
    return 1 if any(r.problems for r in reports) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="+", choices=SCENARIOS, help="which scenarios, in this order")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--seconds", type=int, default=600, help="event time of the suppress input (40 records a second)")
    parser.add_argument("--kills", type=int, default=8, help="kill -9s of the suppress scenarios")
    parser.add_argument("--join-records", type=int, default=12_000)
    parser.add_argument("--join-kills", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
