#!/usr/bin/env python3
"""Counts the product's lines at a git revision, by module: the SDK, the wire and the server's and storage's modules.

Not counted: the bench, the CLIs, the test harness and support, the code generator and generated files, tests.
Issue 53 measures the house by this figure; `--since REV` prints the change per module against REV.

    python3 scripts/product-lines.py [REV] [--since REV]
"""
import subprocess
import sys
from collections import Counter

NOT_PRODUCT = {
    "CourierBench", "CourierCLI", "CourierHarness", "CourierServerMain", "CourierTestSupport",
    "CourierWireCodegen", "CourierWireCodegenMain",
}


def module_of(path):
    parts = path.split("/")
    if parts[0] == "Sources" and len(parts) > 2:
        module = parts[1]
    elif parts[:2] == ["Server", "Sources"] and len(parts) > 3:
        module = parts[2]
    else:
        return None
    if module in NOT_PRODUCT or "Generated" in parts[-1] or not path.endswith(".swift"):
        return None
    return module


def count(rev):
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    lines = Counter()
    for path in files:
        module = module_of(path)
        if module is None:
            continue
        text = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, check=True).stdout
        lines[module] += text.count(b"\n")
    return lines


def main(argv):
    since = None
    if "--since" in argv:
        at = argv.index("--since")
        since = argv[at + 1]
        del argv[at:at + 2]
    rev = argv[0] if argv else "HEAD"
    now = count(rev)
    before = count(since) if since else Counter()
    for module in sorted(set(now) | set(before)):
        change = f"  {now[module] - before[module]:+7,}" if since else ""
        print(f"{module:28} {now[module]:7,}{change}")
    change = f"  {sum(now.values()) - sum(before.values()):+7,}" if since else ""
    print(f"{'total':28} {sum(now.values()):7,}{change}")


if __name__ == "__main__":
    main(sys.argv[1:])
