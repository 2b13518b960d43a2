#!/usr/bin/env python3
"""Runs one courier-bench scenario against several courier-server builds, interleaved, and prints the median and
range of each figure per build: what docs/benchmarks.md and the ADRs quote as "medians and ranges of N interleaved
runs".

    scripts/bench-compare.py --runs 3 before=/tmp/base/courier-server after=Server/.build/release/courier-server \
        -- direct --pairs 1 --window 32 --read-each --messages 5000

Each pass runs every build once, in the order given, so a build is never measured only in a noisy minute. The bench
is Server/.build/release/courier-bench unless --bench names another.
"""
import argparse
import json
import statistics
import subprocess
import sys

FIGURES = [
    ("messages_per_sec", None),
    ("server_cpu_sec_per_1k", None),
    ("context_switches_per_message", None),
    ("send_to_ack_ms", "p50"),
    ("send_to_read_ms", "p50"),
    ("send_to_read_ms", "p99"),
    ("send_to_delivered_ms", "p99"),
    ("fsync_floor_ms", "p50"),
]


def figure(report, key, sub):
    value = report.get(key)
    if isinstance(value, dict):
        value = value.get(sub)
    return value if isinstance(value, (int, float)) else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bench", default="Server/.build/release/courier-bench")
    parser.add_argument("builds", nargs="+", help="name=path-to-courier-server")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    rest = argv[split + 1:]
    builds = [b.split("=", 1) for b in args.builds]
    results = {name: [] for name, _ in builds}
    for run in range(args.runs):
        for name, binary in builds:
            command = [args.bench] + rest + ["--server-binary", binary, "--json"]
            out = subprocess.run(command, capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                sys.exit(f"{name}: {' '.join(command)} failed:\n{out.stderr[-2000:]}")
            report = json.loads(out.stdout.strip().splitlines()[-1])
            results[name].append(report)
            print(f"pass {run + 1} {name}: " + ", ".join(
                f"{k}{'.' + s if s else ''}={figure(report, k, s)}" for k, s in FIGURES
                if figure(report, k, s) is not None), file=sys.stderr)
    print("| figure | " + " | ".join(name for name, _ in builds) + " |")
    print("| --- | " + " | ".join("---" for _ in builds) + " |")
    for key, sub in FIGURES:
        cells = []
        for name, _ in builds:
            values = [v for v in (figure(r, key, sub) for r in results[name]) if v is not None]
            if not values:
                cells.append("")
                continue
            med = statistics.median(values)
            cells.append(f"{med:g} ({min(values):g}–{max(values):g})")
        if any(cells):
            print(f"| {key}{' ' + sub if sub else ''} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
