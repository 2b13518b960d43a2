#!/usr/bin/env python3
"""Plots `courier-bench direct` runs: delivery and read latency percentiles against the load they carried.

Usage:
    for p in 1 2 5 10 25 50; do
        Server/.build/release/courier-bench direct --pairs $p --messages $((p * 400)) --json
    done > direct.jsonl
    python3 Server/Scripts/plot-direct.py direct.jsonl docs/images/direct-latency.png

Each line of the input is one JSON report of the `direct` scenario (other scenarios are skipped). Needs matplotlib
(`python3 -m pip install matplotlib`).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source: str, target: str) -> None:
    runs = []
    with open(source) as lines:
        for line in lines:
            line = line.strip()
            if not line.startswith("{"):
                continue
            report = json.loads(line)
            if report.get("scenario") == "direct":
                runs.append(report)
    if not runs:
        sys.exit(f"no direct reports in {source}")
    runs.sort(key=lambda report: report["pairs"])
    load = [report["messages_per_sec"] for report in runs]

    figure, (latency, cpu) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = [
        ("send_to_ack_ms", "send → ack", "tab:gray"),
        ("send_to_delivered_ms", "send → delivered ✓", "tab:blue"),
        ("send_to_read_ms", "send → read ✓✓", "tab:green"),
    ]
    for field, label, color in series:
        if not all(report.get(field) for report in runs):
            continue
        latency.plot(load, [r[field]["p50"] for r in runs], "o-", color=color, label=f"{label} p50")
        latency.plot(load, [r[field]["p99"] for r in runs], "s--", color=color, label=f"{label} p99")
    for report in runs:
        latency.annotate(
            f"{report['pairs']}p",
            (report["messages_per_sec"], report["send_to_delivered_ms"]["p99"]),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize=8,
        )
    latency.axhline(20, color="tab:red", linewidth=0.8, linestyle=":", label="target: delivered p99 ≤ 20 ms")
    latency.set_yscale("log")
    latency.set_xlabel("messages/s carried (each with delivery and read receipts)")
    latency.set_ylabel("ms (log scale)")
    latency.set_title("direct: latency against load (labels: sender/recipient pairs)")
    latency.legend(fontsize=7)
    latency.grid(True, which="both", alpha=0.3)

    cpu.plot(load, [r["server_cpu_sec_per_1k"] for r in runs], "o-", color="tab:purple", label="courier-server")
    cpu.axhline(0.10, color="tab:red", linewidth=0.8, linestyle=":", label="target ≤ 0.10")
    cpu.set_xlabel("messages/s carried")
    cpu.set_ylabel("server CPU seconds per 1,000 messages")
    cpu.set_title("direct: CPU cost per message")
    cpu.set_ylim(bottom=0)
    cpu.legend(fontsize=8)
    cpu.grid(True, alpha=0.3)

    backend = runs[0].get("backend", "?")
    cores = runs[0].get("cores", "?")
    figure.suptitle(f"courier-bench direct — {backend}, {cores} cores, release build", fontsize=10)
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    print(f"wrote {target} from {len(runs)} runs")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
