#!/usr/bin/env python3
"""Checks that the SDK uses no Apple API beyond the platforms its Package.swift declares.

The compiler checks availability only for the platform it builds for, and on Linux (where CI runs) it builds for
none of Apple's: an `@Observable` class on an iOS 16 package compiles here and fails in Xcode. Nor can this machine
type-check for iOS: a Linux toolchain has no Apple standard library or SDK. So this script does what the compiler
would, for the APIs listed below: every use must sit inside a declaration whose `@available` (or the package's floor)
reaches the API's first version on each declared platform.

    python3 scripts/availability.py          # Sources/CourierSDK and the compiled doc samples; exit 1 on a finding

What it reads: `platforms:` of the root Package.swift; `@available(...)` attributes of the enclosing declarations
(types, extensions, functions, properties), tracked by braces. Uses are found by the patterns in `APIS`; comments are
skipped. A new API with a newer floor goes in `APIS` with its first versions (from its documentation).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCOPES = [ROOT / "Sources" / "CourierSDK", ROOT / "Tests" / "CourierSDKSnippets"]

OBSERVATION = {"iOS": 17, "macOS": 14, "tvOS": 17, "watchOS": 10, "visionOS": 1}
SYNCHRONIZATION = {"iOS": 18, "macOS": 15, "tvOS": 18, "watchOS": 11, "visionOS": 2}
SWIFTUI_17 = OBSERVATION
SWIFTUI_18 = SYNCHRONIZATION
SWIFT_6_2 = {"iOS": 26, "macOS": 26, "tvOS": 26, "watchOS": 26, "visionOS": 26}

# (pattern, what it is, first versions). An attribute pattern (starting with "@") applies to the declaration it
# marks, so that declaration's own `@available` counts.
APIS = [
    (r"@Observable\b", "Observation's @Observable", OBSERVATION),
    (r"@Bindable\b", "SwiftUI's @Bindable", OBSERVATION),
    (r"\bObservationRegistrar\b", "ObservationRegistrar", OBSERVATION),
    (r"\bwithObservationTracking\b", "withObservationTracking", OBSERVATION),
    (r"\bwith(Throwing)?DiscardingTaskGroup\b", "discarding task groups", OBSERVATION),
    (r"\bimport Synchronization\b|\bMutex<|\bAtomic<", "Synchronization (Mutex, Atomic)", SYNCHRONIZATION),
    (r"\bexecutorPreference\b|\bTaskExecutor\b", "task executors", SYNCHRONIZATION),
    (r"\bTask\.immediate\b|\bObservations\s*[({]|\bInlineArray\b|\bSpan<", "Swift 6.2 runtime API", SWIFT_6_2),
    (r"\bContentUnavailableView\b|\.scrollPosition\(id:|\.defaultScrollAnchor\(|\.containerRelativeFrame\(|"
     r"\.sensoryFeedback\(|\.scrollTargetLayout\(|\.scrollTargetBehavior\(|\.onChange\(of:[^)]*initial:",
     "SwiftUI of iOS 17", SWIFTUI_17),
    (r"\.onScrollGeometryChange\(|\.onScrollVisibilityChange\(|\.scrollPosition\(\$", "SwiftUI of iOS 18", SWIFTUI_18),
]

DECLARATION = re.compile(
    r"^\s*(?:(?:public|package|internal|private|fileprivate|open|final|static|nonisolated|override|mutating|"
    r"convenience|required|@\w+(?:\([^)]*\))?)\s+)*(class|struct|enum|extension|actor|protocol|func|init|var|let|subscript)\b"
)
AVAILABLE = re.compile(r"@available\(([^)]*)\)")
VERSION = re.compile(r"\b(iOS|macOS|tvOS|watchOS|visionOS|macCatalyst)\s+(\d+)")


def floor():
    text = (ROOT / "Package.swift").read_text()
    match = re.search(r"platforms:\s*\[([^\]]*)\]", text)
    declared = {}
    for name, version in re.findall(r"\.(iOS|macOS|tvOS|watchOS|visionOS)\(\.v(\d+)", match.group(1) if match else ""):
        declared[name] = int(version)
    return declared


def versions(attributes):
    found = {}
    for attribute in attributes:
        for name, version in VERSION.findall(attribute):
            found[name] = max(found.get(name, 0), int(version))
    return found


def code_of(line):
    """The line without its comment (a `//` outside a string literal)."""
    in_string = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            in_string = not in_string
        elif not in_string and line.startswith("//", index):
            return line[:index]
    return line


def check(path, declared, findings):
    stack = []  # availability of each open brace
    pending = []  # @available attributes waiting for their declaration
    marks = []  # attribute uses waiting for their declaration
    waiting = None  # availability of a declaration whose brace has not opened yet
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = code_of(raw)
        stripped = line.strip()
        if not stripped:
            continue
        pending += AVAILABLE.findall(stripped)
        uses = [(pattern, what, first) for pattern, what, first in APIS if re.search(pattern, stripped)]
        attribute_uses = [use for use in uses if use[0].startswith("@")]
        other_uses = [use for use in uses if not use[0].startswith("@")]
        marks += [(number, use) for use in attribute_uses]

        def enclosing(extra=()):
            # A declaration's signature (its brace not open yet: `waiting`) is within its own availability.
            merged = {}
            for scope in stack + [versions(extra), waiting or {}]:
                for name, version in scope.items():
                    merged[name] = max(merged.get(name, 0), version)
            return merged

        # Attributes on the declaration's own line (`@available(…) func f()`) are stripped before matching.
        bare = re.sub(r"^(@\w+(\([^)]*\))?\s*)+", "", stripped)
        is_declaration = bool(bare) and DECLARATION.match(bare) is not None
        if is_declaration:
            own = versions(pending)
            for mark_line, (pattern, what, first) in marks:
                report(path, mark_line, what, first, declared, enclosing(pending), findings)
            for pattern, what, first in other_uses:
                report(path, number, what, first, declared, enclosing(pending), findings)
            marks, pending = [], []
            waiting = own
        else:
            for pattern, what, first in other_uses:
                report(path, number, what, first, declared, enclosing(), findings)
            if not stripped.startswith("@"):
                pending = []
        # Braces inside string literals are not scopes.
        for char in re.sub(r'"(?:[^"\\]|\\.)*"', '""', line):
            if char == "{":
                stack.append(waiting or {})
                waiting = None
            elif char == "}" and stack:
                stack.pop()
        if is_declaration and "{" not in line and not line.rstrip().endswith(("(", ",")) and "->" not in line \
                and not re.search(r"\b(class|struct|enum|extension|actor|protocol|func|init)\b", stripped):
            waiting = None  # a stored property without a body


def report(path, number, what, first, declared, available, findings):
    short = []
    for platform, floor_version in sorted(declared.items()):
        needed = first.get(platform)
        has = max(floor_version, available.get(platform, 0))
        if needed is not None and has < needed:
            short.append(f"{platform} {needed} (here {has})")
    if short:
        findings.append(f"{path.relative_to(ROOT)}:{number}: {what} needs {', '.join(short)}: add @available")


def own_apis():
    """The SDK's own types that carry `@available`: a use of one must reach its versions too."""
    apis = []
    for path in sorted((ROOT / "Sources" / "CourierSDK").rglob("*.swift")):
        pending = []
        for raw in path.read_text().splitlines():
            stripped = code_of(raw).strip()
            pending += AVAILABLE.findall(stripped)
            match = re.search(r"\b(?:class|struct|enum|actor|protocol)\s+(\w+)", stripped)
            if match and DECLARATION.match(stripped):
                first = versions(pending)
                if first:
                    apis.append((rf"\b{match.group(1)}\b", match.group(1), first))
            if stripped and not stripped.startswith("@"):
                pending = []
    return apis


def self_test():
    """The check itself: an unannotated @Observable class on an iOS 16 floor is found, an annotated one is not, and
    a use of the annotated type in a signature outside it is found."""
    import tempfile
    declared = {"iOS": 16, "macOS": 13}
    cases = [
        ("@MainActor\n@Observable\npublic final class M {\n    var x = 0\n}\n", 1),
        ("@available(iOS 17.0, macOS 14.0, *)\n@MainActor\n@Observable\npublic final class M {\n}\n", 0),
        ("@available(iOS 17.0, macOS 14.0, *)\nfunc f(\n    m: M) {\n    withObservationTracking {}\n}\n", 0),
        ("func f(\n    m: Int) {\n    withObservationTracking {}\n}\n", 1),
        ("@available(iOS 17.0, macOS 14.0, *) func a() {}\nfunc b() {\n    withObservationTracking {}\n}\n", 1),
        ("@available(iOS 17.0, macOS 14.0, *)\nfunc a() {\n    let s = \"{\"\n}\nfunc b() {\n    withObservationTracking {}\n}\n", 1),
    ]
    for text, expected in cases:
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "Case.swift"
            path.write_text(text)
            findings = []
            global ROOT
            root, ROOT = ROOT, pathlib.Path(folder)
            try:
                check(path, declared, findings)
            finally:
                ROOT = root
            if len(findings) != expected:
                sys.exit(f"availability self-test: {expected} finding(s) expected, got {findings} for:\n{text}")


def main():
    self_test()
    declared = floor()
    if not declared:
        sys.exit("availability: no platforms in Package.swift")
    APIS.extend(own_apis())
    findings = []
    for scope in SCOPES:
        for path in sorted(scope.rglob("*.swift")):
            check(path, declared, findings)
    for finding in findings:
        print(finding)
    platforms = ", ".join(f"{name} {version}" for name, version in sorted(declared.items()))
    if findings:
        print(f"availability: {len(findings)} use(s) beyond the declared platforms ({platforms})")
        sys.exit(1)
    print(f"availability: every listed API is used within the declared platforms ({platforms})")


if __name__ == "__main__":
    main()
