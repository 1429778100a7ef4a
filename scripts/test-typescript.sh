#!/usr/bin/env bash
# Build and test the TypeScript client (clients/typescript) against a real `caderno serve`.
#
# npm ci runs only when node_modules is missing or package-lock.json changed
# since the last install (a checksum kept in node_modules). Then: the
# committed generated types must match the committed openapi.json, the build
# (generate + tsc), and the node tests, which start their own servers with
# the repository's .venv (or CADERNO_PYTHON). Prints one summary line; exits
# non-zero on any failure. Skips, exit 0, only when node is not installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
package="$root/clients/typescript"

if ! command -v node >/dev/null 2>&1; then
    echo "typescript client: SKIPPED: node is not installed (Node 20 or newer runs clients/typescript's tests)"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "typescript client: FAILED: node is installed but npm is not" >&2
    exit 1
fi

cd "$package"
started=$(date +%s)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Run one step quietly; on failure show its output and stop.
step() {
    local what="$1"
    shift
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "typescript client: FAILED at $what" >&2
        exit 1
    fi
}

stamp=node_modules/.caderno-lock-checksum
want="$(cksum package-lock.json)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    step "npm ci" npm ci --no-audit --no-fund
    echo "$want" >"$stamp"
    installed="npm ci, "
else
    installed=""
fi

step "the generated types (src/generated/openapi.ts is not what openapi.json generates: npm run build, then commit it)" \
    npm run --silent check-generated
step "npm run build" npm run --silent build

status=0
npm test >"$log" 2>&1 || status=$?
count() { sed -n "s/^# $1 \([0-9]*\)$/\1/p" "$log" | tail -1; }
tests="$(count tests)"
passed="$(count pass)"
failed="$(count fail)"
cancelled="$(count cancelled)"
if [[ $status -ne 0 ]]; then
    cat "$log" >&2
fi
summary="typescript client: ${passed:-0} of ${tests:-0} node tests passed, ${failed:-0} failed, ${cancelled:-0} cancelled"
summary+=" (${installed}build and tests in $(($(date +%s) - started)) s)"
# Every test must pass: none ran, or one skipped, is a failure too.
if [[ $status -ne 0 || "${passed:-0}" == 0 || "$passed" != "$tests" ]]; then
    echo "$summary: FAILED" >&2
    exit 1
fi
echo "$summary"
