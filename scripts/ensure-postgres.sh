#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use is up on 127.0.0.1:5432, with the
# role `caderno` and the database `caderno_test`.
# Installed but down: start it. Not installed: say so once; the PostgreSQL
# tests then skip with that reason (tests/_pg.py).
set -u
if ! command -v pg_ctlcluster >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null 2>&1; then
  echo "ensure-postgres: PostgreSQL is not installed on this machine; PostgreSQL tests will be skipped" >&2
  exit 0
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  for version in $(ls /etc/postgresql 2>/dev/null); do
    echo "ensure-postgres: starting PostgreSQL $version" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && break
    sleep 1
  done
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "ensure-postgres: PostgreSQL did not come up on 127.0.0.1:5432" >&2
  exit 1
fi
# Run admin SQL as the postgres superuser: over TCP (trust auth on this
# machine kind) or, failing that, over the local socket as the postgres user.
admin() {
  psql -h 127.0.0.1 -U postgres -d postgres -tAc "$1" 2>/dev/null ||
    (cd / && su postgres -c "psql -d postgres -tAc \"$1\"")
}
if [ "$(admin "SELECT 1 FROM pg_roles WHERE rolname = 'caderno'")" != "1" ]; then
  admin "CREATE ROLE caderno LOGIN CREATEDB" >/dev/null && echo "ensure-postgres: created role caderno" >&2
fi
if [ "$(admin "SELECT 1 FROM pg_database WHERE datname = 'caderno_test'")" != "1" ]; then
  admin "CREATE DATABASE caderno_test OWNER caderno" >/dev/null && echo "ensure-postgres: created database caderno_test" >&2
fi
exit 0
