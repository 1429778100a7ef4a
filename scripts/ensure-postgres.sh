#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use is up on 127.0.0.1:5432.
# Installed but down: start it. Not installed: say so once; the PostgreSQL
# tests then skip with that reason (tests/_pg.py).
set -u
if ! command -v pg_ctlcluster >/dev/null 2>&1 && ! command -v pg_isready >/dev/null 2>&1; then
  echo "ensure-postgres: PostgreSQL is not installed on this machine; PostgreSQL tests will be skipped" >&2
  exit 0
fi
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  exit 0
fi
for version in $(ls /etc/postgresql 2>/dev/null); do
  echo "ensure-postgres: starting PostgreSQL $version" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
done
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && exit 0
  sleep 1
done
echo "ensure-postgres: PostgreSQL did not come up on 127.0.0.1:5432" >&2
exit 1
