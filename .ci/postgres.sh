#!/usr/bin/env bash
# Installs (if needed) and starts a throwaway PostgreSQL for tests on Debian 12, as root.
# Listens on 127.0.0.1:${PGPORT:-55432}, trust auth, user "postgres", data in ${PGDATA:-/tmp/pgdata-$PGPORT}.
# Prints the COURIER_TEST_POSTGRES_URL to use. Stop it with: .ci/postgres.sh stop
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PGPORT=${PGPORT:-55432}
PGDATA=${PGDATA:-/tmp/pgdata-$PGPORT}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1   # PostgreSQL 15 on bookworm
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
if [ "${1:-start}" = "stop" ]; then
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop
    exit 0
fi
install -d -o postgres -g postgres -m 700 "$PGDATA"
[ -f "$PGDATA/PG_VERSION" ] || runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -U postgres \
    --auth=trust -E UTF8 --no-instructions >/dev/null
if ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA -c max_connections=1000 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >/dev/null
fi
"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" -t 30
echo "postgres://postgres@127.0.0.1:$PGPORT/postgres"
