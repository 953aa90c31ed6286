#!/usr/bin/env bash
# Debian's Chromium and its WebDriver, for the browser tests (tests/browser/). Safe to run twice:
# nothing is installed when both are already on PATH.
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null; then
  SUDO=(sudo)
else
  echo "ensure-chromium: chromium/chromedriver missing; run as root: apt-get install -y chromium chromium-driver" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver
chromium --version
