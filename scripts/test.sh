#!/usr/bin/env bash
# Runs every test of both packages: the SDK package at the root (wire + SDK unit tests), then the server package
# (storage contract, server, and end-to-end tests with real servers on 127.0.0.1 and real SDK clients).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! pkg-config --exists sqlite3 2>/dev/null && [ ! -f /usr/include/sqlite3.h ]; then
    echo "SQLite headers are missing: apt-get install libsqlite3-dev" >&2
    exit 1
fi

echo "== SDK package (root)"
swift test
echo "== Server package (Server/)"
swift test --package-path Server
