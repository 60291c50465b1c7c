"""Renders a bench/peers JSON into a PNG bar chart (run in .cache/peers/chart, which has matplotlib).

    .cache/peers/chart/bin/python bench/peers/chart.py bench/results/peers-<date>.json out.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MEASURES = (("from_start", "from process start"), ("from_first_write", "from first write"), ("output_span", "output span"))


def main(source: str, target: str) -> int:
    doc = json.load(open(source))
    workloads = list(doc["summary"])
    fig, axes = plt.subplots(len(workloads), 1, figsize=(10, 3.2 * len(workloads)), squeeze=False)
    for ax, workload in zip(axes[:, 0], workloads, strict=True):
        entries = sorted(doc["summary"][workload].values(), key=lambda e: -e["rate"].get("from_first_write", 0))
        width = 0.8 / len(MEASURES)
        for i, (measure, label) in enumerate(MEASURES):
            xs = [j + (i - 1) * width for j in range(len(entries))]
            ax.bar(xs, [e["rate"].get(measure, 0) for e in entries], width, label=label)
        partial = [(j, e["partial_units_per_s"]) for j, e in enumerate(entries) if "partial_units_per_s" in e]
        if partial:
            ax.bar([j for j, _ in partial], [v for _, v in partial], 0.8, color="none", edgecolor="grey", hatch="//",
                   label="outputs/s before the time limit")
        names = [e["system"] + ("" if e["correct"] else "\n(not ranked: wrong or timed out)") for e in entries]
        ax.set_xticks(range(len(entries)), names, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(bottom=1000)
        unit = "records/s" if workload == "passthrough" else "words/s"
        ax.set_ylabel(unit)
        ax.set_title(f"{workload}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].legend(fontsize=8)
    s = doc["settings"]
    loads = [r["load_average_at_start"] for r in doc["runs"]]
    fig.suptitle(f"bench/peers {doc['date']}: {s['words']:,} words in {s['lines']:,} lines, median of {s['rounds']}; "
                 f"load average {min(loads):.1f}-{max(loads):.1f} at the runs' starts", fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
