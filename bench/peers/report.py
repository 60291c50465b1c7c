"""Summaries of bench/peers runs: medians per (workload, system), ratios ours / each peer, Markdown."""

from __future__ import annotations

import statistics
from typing import Any

MEASURES = ("from_start", "from_first_write", "output_span")
OURS = ("ours-alos", "ours-alos-2w", "ours-eos")
UNIT = {"passthrough": "records/s"}


def summarize(results: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """workload -> system -> medians of the rounds (rates in input units per second) and the verdict."""
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        summary.setdefault(r["workload"], {}).setdefault(r["system"], {"runs": []})["runs"].append(r)
    for systems in summary.values():
        for name, entry in systems.items():
            runs = entry.pop("runs")
            timed = [r for r in runs if "seconds" in r and r["status"] == "ok"]
            entry["rounds"] = len(runs)
            entry["correct"] = all(r["correct"] for r in runs)
            entry["status"] = ",".join(sorted({r["status"] for r in runs}))
            entry["units"] = runs[0]["units"]
            entry["seconds"] = {m: statistics.median(r["seconds"][m] for r in timed) for m in MEASURES} if timed else {}
            entry["rate"] = {m: entry["units"] / s for m, s in entry["seconds"].items() if s > 0}
            entry["cpu_s_per_million_units"] = statistics.median(r["cpu_s_per_million_units"] for r in runs)
            entry["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
            # A run stopped at its time limit: output records per second of its output span (cache off: one per word).
            partial = [r["output_records"] / r["seconds"]["output_span"] for r in runs
                       if r["status"] == "timeout" and r.get("seconds", {}).get("output_span")]
            if partial:
                entry["partial_units_per_s"] = statistics.median(partial)
            entry["ranked"] = entry["correct"] and bool(entry["rate"])
            entry["system"] = name
    return summary


def ratios(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """workload -> ours variant -> peer -> measure -> ours' rate / the peer's (ranked peers only)."""
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for workload, systems in summary.items():
        for ours in OURS:
            mine = systems.get(ours)
            if not mine or not mine["ranked"]:
                continue
            for peer, entry in systems.items():
                if peer == ours or not entry["ranked"]:
                    continue
                out.setdefault(workload, {}).setdefault(ours, {})[peer] = {
                    m: mine["rate"][m] / entry["rate"][m] for m in MEASURES if m in mine["rate"] and m in entry["rate"]}
    return out


def _rate(entry: dict[str, Any], measure: str) -> str:
    value = entry["rate"].get(measure)
    return f"{value:,.0f}" if value else "-"


def markdown(document: dict[str, Any]) -> str:
    loads = [r["load_average_at_start"] for r in document.get("runs", ())] or [0.0]
    lines = [f"{document['date']}, {document['machine']['cpus']} cores, load average "
             f"{document['load_average']['start'][0]:.2f} at the start and {document['load_average']['end'][0]:.2f} at the end "
             f"({min(loads):.2f} to {max(loads):.2f} at the runs' starts); "
             f"{document['settings']['lines']:,} lines = {document['settings']['words']:,} words, "
             f"median of {document['settings']['rounds']} rounds.", ""]
    for workload, systems in document["summary"].items():
        unit = UNIT.get(workload, "words/s")
        per = "line" if workload == "passthrough" else "word"
        lines += [f"**{workload}** ({unit}; CPU seconds per million input {per}s):", "",
                  f"| system | from start | from first write | output span | CPU s / M {per}s | peak RSS MB | correct | rounds |",
                  "|---|---:|---:|---:|---:|---:|---|---:|"]
        order = sorted(systems.values(), key=lambda e: -e["rate"].get("from_first_write", 0))
        for e in order:
            verdict = "yes" if e["correct"] else f"**no** ({e['status']})"
            if "partial_units_per_s" in e:
                verdict += f", ~{e['partial_units_per_s']:,.0f} outputs/s before the time limit"
            lines.append(f"| {e['system']} | {_rate(e, 'from_start')} | {_rate(e, 'from_first_write')} | "
                         f"{_rate(e, 'output_span')} | {e['cpu_s_per_million_units']:,.1f} | {e['peak_rss_mb']:,.0f} | "
                         f"{verdict} | {e['rounds']} |")
        lines.append("")
    lines += ["**Ratios, ours / each peer** (rates; from start / from first write / output span):", "",
              "| workload | ours | peer | from start | from first write | output span |", "|---|---|---|---:|---:|---:|"]
    for workload, by_ours in document["ratios"].items():
        for ours, peers in by_ours.items():
            for peer, r in peers.items():
                cells = " | ".join(f"{r[m]:.2f}" if m in r else "-" for m in MEASURES)
                lines.append(f"| {workload} | {ours} | {peer} | {cells} |")
    return "\n".join(lines) + "\n"
