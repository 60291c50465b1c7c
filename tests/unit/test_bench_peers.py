"""The plumbing of bench/peers (no broker, no peer installs): input and truth, the output check,
the process-tree sampler, the commands per system, and the summary with its ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "peers"))

import harness
import report


def test_input_is_seeded_and_its_truths_agree() -> None:
    now = 1_790_000_030_000
    data = harness.make_input(300, now)
    assert data.records == harness.make_input(300, now).records
    assert data.words == 3000 == sum(data.truth["wc"].values()) == sum(data.truth["windowed"].values())
    assert all(value == value.upper() for _, value, _ in data.records)
    times = [ts for _, _, ts in data.records]
    assert max(times) - min(times) < 8000 and min(times) < now // 60_000 * 60_000 <= max(times)
    assert {key.rsplit("@", 1)[1] for key in data.truth["windowed"]} <= {str(now // 60_000 * 60_000 - 60_000),
                                                                          str(now // 60_000 * 60_000)}
    assert len(data.truth["passthrough"]) == 300


def test_output_check_reports_wrong_missing_and_extra_keys() -> None:
    truth = {"a": 2, "b": 1}
    assert harness.check_output("wc", truth, {"a": 2, "b": 1}) == (True, {"missing": 0, "wrong": 0, "extra": 0})
    assert harness.check_output("wc", truth, {"a": 1, "c": 1}) == (False, {"missing": 1, "wrong": 1, "extra": 1})
    assert harness.decode_value("wc", b"17") == 17
    assert harness.decode_value("wc", (17).to_bytes(8, "big")) == 17
    assert harness.decode_value("passthrough", b"17") == b"17"


def test_tree_sampler_sees_a_child_and_its_memory() -> None:
    code = "import subprocess, sys, time; b = bytearray(60_000_000); time.sleep(0.4)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = harness.TreeSampler(proc.pid)
    try:
        for _ in range(30):
            sampler.sample()
            if sampler.peak_rss > 60_000_000:
                break
            subprocess.run(["sleep", "0.01"], check=True)
    finally:
        proc.wait()
    assert sampler.peak_rss > 60_000_000
    assert proc.pid in sampler.cpu_ticks


def test_commands_per_system() -> None:
    run = harness.RunContext("b:1", "app", "in", "out", "/s", 10, {"quix": Path("/q/python"), "faust": Path("/f/python")}, "cp")
    assert harness.SYSTEMS["ours-eos"].command("wc-cache", run)[-4:] == ["--cache-bytes", str(harness.CACHE_BYTES),
                                                                          "--guarantee", "exactly_once_v2"]
    java = harness.SYSTEMS["kstreams"].command("wc", run)
    assert java[java.index("PeersBench") + 1:] == ["b:1", "app", "in", "out", "wc", "0", "/s", str(harness.COMMIT_MS)]
    assert harness.SYSTEMS["quix"].command("windowed", run)[0] == "/q/python"
    assert harness.SYSTEMS["aiokafka-batch"].command("passthrough", run)[-1] == "batch"


def _run(system: str, seconds: float, correct: bool = True) -> dict[str, object]:
    return {"system": system, "workload": "wc", "status": "ok", "correct": correct, "units": 1000,
            "seconds": {m: seconds for m in report.MEASURES}, "cpu_s_per_million_units": 5.0, "peak_rss_mb": 50.0}


def test_summary_takes_medians_and_ranks_only_correct_systems() -> None:
    runs = [_run("ours-alos", s) for s in (1.0, 2.0, 9.0)] + [_run("quix", 4.0), _run("faust", 1.0, correct=False)]
    summary = report.summarize(runs)
    assert summary["wc"]["ours-alos"]["rate"]["from_start"] == pytest.approx(500.0)
    ratios = report.ratios(summary)
    assert ratios["wc"]["ours-alos"] == {"quix": {m: pytest.approx(2.0) for m in report.MEASURES}}
    doc = {"date": "d", "machine": {"cpus": 2}, "load_average": {"start": (1.0,), "end": (2.0,)},
           "settings": {"lines": 100, "words": 1000, "rounds": 3}, "summary": summary, "ratios": ratios}
    text = report.markdown(doc)
    assert "| faust |" in text and "**no**" in text and "| wc | ours-alos | quix | 2.00 | 2.00 | 2.00 |" in text
