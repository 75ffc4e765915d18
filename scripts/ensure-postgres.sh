#!/usr/bin/env bash
# The connect tests run a private PostgreSQL server (initdb + pg_ctl on a free port).
# Install Debian's server package when no initdb is present.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
echo "installing the PostgreSQL server for the connect tests" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
# No service start inside containers: the tests start their own server.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
