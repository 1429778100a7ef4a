#!/usr/bin/env bash
# The whole test suite, as `make test` runs it: pytest on WORKERS processes
# in the foreground and, beside it, the other checks one after another — the
# type checker, the docs site's strict build, the TypeScript client's tests.
#
# Beside, not before: pytest leaves part of the cores idle while its tests
# wait on subprocesses, servers and leases, and the other checks fill that
# time (~60 s of a run on two cores). Their output is shown once pytest is
# done, whole; the script exits non-zero if any of them failed.
set -uo pipefail

workers="${1:?usage: scripts/test.sh WORKERS}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Bytecode cached: the tests start hundreds of Python subprocesses (the CLI, servers, workers)
# that import caderno from src/, and without its .pyc files each compiles it again (~0.1 s of
# CPU a start, a third of a CLI command's). Some shells and CI images set
# PYTHONDONTWRITEBYTECODE; the suite writes the (git-ignored) __pycache__ folders anyway.
unset PYTHONDONTWRITEBYTECODE
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

(
    set -e
    .venv/bin/mypy
    NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
    bash scripts/test-typescript.sh
) >"$log" 2>&1 &
checks=$!

.venv/bin/python -m pytest -q -n "$workers"
tests=$?

wait "$checks"
others=$?
echo "--- type check, docs build, TypeScript client ($([ $others = 0 ] && echo passed || echo FAILED)):"
cat "$log"
if [ "$tests" != 0 ]; then exit "$tests"; fi
exit "$others"
