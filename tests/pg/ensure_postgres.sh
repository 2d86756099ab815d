#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server binaries are installed for the team-store tests
# (tests/pg/; mibyan_jupyter/testing/pg_cluster.py starts a throwaway server from them).
# The tests need only the binaries: no system cluster is created or started (the package
# would otherwise make and start one, "main"). As root, install with apt; otherwise say how
# and fail. Nothing but the distribution's package registry is reached.
set -euo pipefail

if [ -n "${MIBYAN_PG_BIN:-}" ] && [ -x "$MIBYAN_PG_BIN/postgres" ]; then
    exit 0
fi
if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "ensure_postgres: no /usr/lib/postgresql/*/bin/postgres; installing Debian's postgresql package" >&2
    export DEBIAN_FRONTEND=noninteractive
    mkdir -p /etc/postgresql-common
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
    fi
    apt-get update
    apt-get install -y -o Dpkg::Options::=--force-confold postgresql
    if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
        exit 0
    fi
    echo "ensure_postgres: apt-get installed postgresql but no /usr/lib/postgresql/*/bin/postgres" >&2
    exit 1
fi

cat >&2 <<MSG
ensure_postgres: PostgreSQL is not installed and this is not root, so it cannot be installed here.
Install it, then run the tests again:
    sudo apt-get update && sudo apt-get install -y postgresql
(Without it the team-store tests in tests/pg/ are skipped; MIBYAN_PG_BIN may name another bin folder.)
MSG
exit 1
