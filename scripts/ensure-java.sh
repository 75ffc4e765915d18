#!/usr/bin/env bash
# PySpark 4 needs a Java 17+ runtime. Install Debian's if none is on PATH.
set -euo pipefail
version() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]}'; }
if command -v java >/dev/null 2>&1 && [ "$(version)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
echo "installing a Java 17 runtime for Spark" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
