#!/usr/bin/env bash
# Installs Debian's Chromium for the browser test of `rag ui` (tests/slow/test_ui_browser.py).
# Idempotent: does nothing when /usr/bin/chromium exists. Playwright drives this system
# browser; `playwright install` (which downloads browser builds at run time) is never used.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
step() { printf '\n==> %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install_browser.sh: need root or sudo for apt-get" >&2; exit 1; }
    SUDO="sudo"
fi
step "installing Debian's chromium for the browser test (apt-get, once)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
step "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
