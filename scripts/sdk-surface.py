#!/usr/bin/env python3
"""Checks that the SDK's public API is its own: the wire protocol's frames stay out of an app's namespace.

`import CourierSDK` brings the SDK's types and the vocabulary Sources/CourierSDK/Exports.swift re-exports, one
declaration at a time (`@_exported public import struct CourierWire.AccountID`): the identifiers and small values the
API speaks in. Anything else of CourierWire (requests, acks, events, `Wire…` types) an app cannot name. This fails
when:

- CourierWire is re-exported whole (`@_exported import CourierWire`);
- a public declaration of the SDK names a CourierWire type that is not re-exported: an app could get a value of it
  and not write its type (a public call returning `GroupMembersAck`, say);
- a re-exported type is not a vocabulary type (a name ending in Request, Ack, Event, Frame, or starting with Wire).

    python3 scripts/sdk-surface.py     # exit 1 on a finding
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SDK = ROOT / "Sources" / "CourierSDK"
WIRE = ROOT / "Sources" / "CourierWire"
EXPORTS = SDK / "Exports.swift"

DECLARATION = re.compile(r"^\s*public (?:struct|enum|final class|class|protocol|typealias|actor) ([A-Z][A-Za-z0-9]*)", re.M)
# A public declaration's signature: from `public` to its body or the end of its line (continued lines included
# while parentheses stay open).
PUBLIC = re.compile(r"\bpublic (?:private\(set\) )?(?:nonisolated )?(?:static |convenience )?(?:func|var|let|init|case|subscript)\b")
FRAME = re.compile(r"^(Wire[A-Z]\w*|\w+(Request|Ack|Event|Frame))$")


def strip_comments(text):
    return "\n".join(line.split("//", 1)[0] if not line.lstrip().startswith("///") else "" for line in text.splitlines())


def signatures(text):
    """Every public member declaration's signature (up to its `{` or `=` at depth 0, across lines)."""
    for match in PUBLIC.finditer(text):
        depth, end = 0, match.end()
        while end < len(text):
            ch = text[end]
            if ch in "([<":
                depth += 1
            elif ch in ")]>":
                depth -= 1
            elif depth <= 0 and (ch == "{" or ch == "=" or (ch == "\n" and not text[end + 1 :].lstrip().startswith(("->", "async", "throws", "where")))):
                break
            end += 1
        yield text[match.start() : end]


def main():
    wire_types = set()
    for path in WIRE.rglob("*.swift"):
        wire_types.update(DECLARATION.findall(path.read_text()))
    sdk_types = set()
    for path in SDK.rglob("*.swift"):
        sdk_types.update(DECLARATION.findall(path.read_text()))
    exports_text = EXPORTS.read_text()
    exported = set(re.findall(r"@_exported public import \w+ CourierWire\.(\w+)", exports_text))
    findings = []
    if re.search(r"@_exported\s+(public\s+)?import\s+CourierWire\s*$", exports_text, re.M):
        findings.append(f"{EXPORTS.relative_to(ROOT)}: CourierWire is re-exported whole")
    for name in sorted(exported):
        if FRAME.match(name):
            findings.append(f"{EXPORTS.relative_to(ROOT)}: {name} is a frame of the protocol, not vocabulary")
        if name not in wire_types:
            findings.append(f"{EXPORTS.relative_to(ROOT)}: {name} is not a public type of CourierWire")
    hidden = wire_types - exported - sdk_types
    for path in sorted(SDK.rglob("*.swift")):
        text = strip_comments(path.read_text())
        for signature in signatures(text):
            for name in sorted(hidden):
                if re.search(rf"\b{name}\b", signature):
                    line = text[: text.index(signature)].count("\n") + 1
                    findings.append(f"{path.relative_to(ROOT)}:{line}: public API names {name}, which an app cannot name")
    for finding in findings:
        print(finding)
    if findings:
        print(f"sdk-surface: {len(findings)} finding(s)")
        return 1
    print(f"sdk-surface: the SDK's public API names {len(exported)} re-exported vocabulary types of CourierWire and no other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
