"""Full-size reliability runs (issue 15): the chaos scenarios of tests/chaos at the issue's sizes.

Starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end), runs the chosen
scenarios of tests/chaos/scenarios.py `FULL` through tests/chaos/harness.py and prints their
figures: records, kills, restarts, wrong counts, duplicates, durations, restore times. Exit code
1 if any scenario found something wrong (the seed is printed; `--seed` replays the plan).

    flock /tmp/bench.lock .venv/bin/python bench/chaos/run.py eos alos stall autostop
    .venv/bin/python bench/chaos/run.py eos --lines 100000 --kills 5     # smaller
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams_core.broker import LocalKafkaBroker
from tests.chaos.harness import ChaosReport, chaos_seed, run_scenario
from tests.chaos.scenarios import FULL, Scenario


def _scenario(name: str, args: argparse.Namespace) -> Scenario:
    changes = {
        key: value
        for key, value in {
            "lines": args.lines, "kills": args.kills, "terms": args.terms, "instances": args.instances,
            "produce_seconds": args.produce_seconds, "stall_seconds": args.stall_seconds,
            "fault_seconds": args.fault_seconds,
        }.items()
        if value is not None
    }  # fmt: skip
    return FULL[name].scaled(**changes)


async def _main(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else chaos_seed()
    work = Path(tempfile.mkdtemp(prefix="chaos-bench-"))
    broker = LocalKafkaBroker(work / "broker", port=0)
    broker.start()
    reports: list[ChaosReport] = []
    try:
        for name in args.scenarios:
            scenario = _scenario(name, args)
            print(f"== {name}: {scenario}", flush=True)
            report = await run_scenario(
                scenario, seed=seed, bootstrap=broker.bootstrap_servers, tmp_path=work / name, broker_pid=broker.pid
            )
            reports.append(report)
            print(json.dumps(report.figures(), ensure_ascii=False, indent=1), flush=True)
            for problem in report.problems:
                print(f"!! {name} (seed {seed}): {problem}", flush=True)
    finally:
        broker.stop()
        if args.keep or any(r.problems for r in reports):
            print(f"logs and state kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    _table(reports)
    if args.json:
        args.json.write_text(json.dumps([r.figures() for r in reports], ensure_ascii=False, indent=1))
    return 1 if any(r.problems for r in reports) else 0


def _table(reports: list[ChaosReport]) -> None:
    if not reports:
        return
    rows = [r.figures() for r in reports]
    keys = list(rows[0])
    print("\n| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="+", choices=sorted(FULL), help="which scenarios, in this order")
    parser.add_argument("--seed", type=int, default=None, help="default: $CHAOS_SEED or random")
    parser.add_argument("--lines", type=int, help="input records (lines)")
    parser.add_argument("--kills", type=int, help="kill -9 count")
    parser.add_argument("--terms", type=int, help="SIGTERM count")
    parser.add_argument("--instances", type=int)
    parser.add_argument("--produce-seconds", type=float, help="spread the input over this long")
    parser.add_argument("--fault-seconds", type=float, help="the window the faults fall in")
    parser.add_argument("--stall-seconds", type=float, help="broker SIGSTOP length")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep logs and state directories")
    parser.add_argument("--log-level", default=os.environ.get("CHAOS_LOG_LEVEL", "INFO"))
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("aiokafka", "httpx", "streams_core"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
