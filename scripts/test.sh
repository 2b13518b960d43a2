#!/usr/bin/env bash
# Runs every test of both packages: the SDK package at the root (wire + SDK unit tests), then the server package
# (storage contract, server, and end-to-end tests with real servers on 127.0.0.1 and real SDK clients).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! pkg-config --exists sqlite3 2>/dev/null && [ ! -f /usr/include/sqlite3.h ]; then
    echo "SQLite headers are missing: apt-get install libsqlite3-dev" >&2
    exit 1
fi

# A hung test must fail the run, not stall it: each package's tests get at most 20 minutes (builds included).
echo "== SDK package (root)"
timeout -k 10 1200 swift test
echo "== Server package (Server/)"
timeout -k 10 1200 swift test --package-path Server
