#!/usr/bin/env bash
# Make sure PgBouncer is installed, so the tests can run caderno's PostgreSQL
# store through a pooler in transaction mode (tests/_pg.py starts one).
# Missing: install Debian's package quietly. Where that cannot be done (no
# apt, no network, not root), say so once and go on: the pooler tests then
# skip with a line saying pgbouncer is not installed.
set -u
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 &&
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1; }; }; then
  echo "ensure-pgbouncer: installed pgbouncer" >&2
else
  echo "ensure-pgbouncer: could not install pgbouncer; the pooler tests will be skipped" >&2
fi
exit 0
