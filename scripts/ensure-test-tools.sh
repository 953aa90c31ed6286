#!/usr/bin/env bash
# What the tests need from Debian besides the engine: Chromium and its WebDriver for the browser
# tests (tests/browser/), and ripgrep, which the native loop's grep tool uses when the host has it
# (its Python fallback is tested too). Safe to run twice: nothing is installed when all are on PATH.
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v rg >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null; then
  SUDO=(sudo)
else
  echo "ensure-test-tools: chromium, chromedriver or rg missing; run as root: apt-get install -y chromium chromium-driver ripgrep" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver ripgrep
chromium --version
