#!/usr/bin/env python3
"""Fails when docs/architecture.md cites a name the code does not have.

Every span in backticks is checked: a path (it contains a `/` and names a file or folder) must exist; otherwise each
identifier in it (`Change.events(of:)` gives `Change`, `events`, `of`) must occur as a whole word somewhere in the
product's sources (Swift, the OpenAPI document, the wire table, the console's files, the CI scripts). The glossary's
last column lists the names *not* to use, so it is not checked. Spans in code blocks are not checked (pictures).

    python3 scripts/doc-names.py [docs/architecture.md …]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["Sources", "Server/Sources", "Server/Tests", "Tests", "Server/Package.swift", "Package.swift", ".ci", "scripts"]
PATH_ROOTS = ("Server/", "Sources/", "Tests/", "docs/", "scripts/", ".ci/")
EXTENSIONS = (".swift", ".yaml", ".table", ".js", ".html", ".css", ".py", ".sh", "run")


def corpus_words():
    """Every word of the sources, and the names of their files and folders."""
    words = set()
    for entry in SOURCES:
        path = os.path.join(ROOT, entry)
        files = [path] if os.path.isfile(path) else []
        for folder, folders, names in os.walk(path):
            folders[:] = [name for name in folders if not name.startswith(".build")]
            words.update(folders)
            words.update(names)
            files += [os.path.join(folder, name) for name in names]
        for file in files:
            if not file.endswith(EXTENSIONS) or "/.build" in file:
                continue
            with open(file, encoding="utf-8", errors="replace") as handle:
                words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", handle.read()))
    return words


def spans(text):
    """(line number, span) for every backticked span outside code blocks, skipping the glossary's last column."""
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        if line.startswith("|") and line.count("|") >= 6:
            cells = line.split("|")
            line = "|".join(cells[:-2])  # the table's last column: the words not to use
        for span in re.findall(r"`([^`]+)`", line):
            yield number, span


def main(argv):
    documents = argv or [os.path.join(ROOT, "docs", "architecture.md")]
    words = corpus_words()
    missing = []
    for document in documents:
        with open(document, encoding="utf-8") as handle:
            text = handle.read()
        for number, span in spans(text):
            if span.startswith(PATH_ROOTS):
                path = span.split(":")[0].rstrip("/…")
                # A build's output (`Server/.build/debug`) exists only after a build; CI checks before building.
                if "*" not in path and "/.build" not in path and not os.path.exists(os.path.join(ROOT, path)):
                    missing.append((document, number, span, path))
                continue
            if re.fullmatch(r"[A-Za-z0-9_+.-]+\.(swift|md|yaml|py|table)", span):
                if span not in words:
                    missing.append((document, number, span, span))
                continue
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span):
                # `start_*`, `*_seq`: a pattern's fixed part.
                if word.startswith("_") or word.endswith("_"):
                    continue
                if word not in words:
                    missing.append((document, number, span, word))
    for document, number, span, word in missing:
        print(f"{os.path.relpath(document, ROOT)}:{number}: `{span}` names {word!r}, which no source has")
    if missing:
        print(f"{len(missing)} names cited that the code does not have")
        return 1
    print("every name cited exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
