#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium, for the inspector's
# browser tests (Playwright drives it with executable_path; Playwright's own
# browser download cannot reach its CDN from a closed network).
# Idempotent and quiet: exits 0 at once when Chromium is already there.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "ensure-chromium: $CHROMIUM is missing and installing it needs root (or sudo)" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: $CHROMIUM is missing and apt-get is not available; install Chromium by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "ensure-chromium: installing Debian's chromium (once)..." >&2
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "ensure-chromium: apt-get could not install chromium" >&2
    exit 1
fi
if [ ! -x "$CHROMIUM" ]; then
    echo "ensure-chromium: chromium installed but $CHROMIUM is missing" >&2
    exit 1
fi
