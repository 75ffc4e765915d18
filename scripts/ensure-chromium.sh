#!/usr/bin/env bash
# The web console's browser test drives Debian's chromium through Playwright (pip package
# `playwright`, launched with executable_path=/usr/bin/chromium; `playwright install` and
# its browser downloads are never used). Install the distribution's package when missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "installing chromium for the web console's browser test" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
