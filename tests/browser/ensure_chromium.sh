#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium for the browser tests (tests/browser/).
# Playwright drives this system browser; never run `playwright install` (it downloads a browser
# and fails without internet). As root, install it with apt; otherwise say how and fail.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "ensure_chromium: $CHROMIUM is missing; installing Debian's chromium package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y chromium
    if [ -x "$CHROMIUM" ]; then
        exit 0
    fi
    echo "ensure_chromium: apt-get installed chromium but $CHROMIUM is still missing" >&2
    exit 1
fi

cat >&2 <<MSG
ensure_chromium: $CHROMIUM is missing and this is not root, so it cannot be installed here.
Install it, then run the tests again:
    sudo apt-get update && sudo apt-get install -y chromium
(Without it the browser tests in tests/browser/ are skipped.)
MSG
exit 1
