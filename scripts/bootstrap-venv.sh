#!/usr/bin/env bash
# Create .venv and install Cage with its dev extras. Re-installs only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'cage: %s\n' "$*" >&2; }
PY="${PYTHON:-python3}"

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    log "$PY is missing or older than 3.11; Cage needs Python >= 3.11"
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$PY" -m venv .venv 2>/dev/null; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
            log "installing python3-venv"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            rm -rf .venv
            "$PY" -m venv .venv
        else
            log "cannot create a virtualenv with $PY (install python3-venv)"
            exit 1
        fi
    fi
fi

want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat .venv/.installed 2>/dev/null || true)" = "$want" ]; then
    exit 0
fi
log "installing Cage and its dev tools into .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[dev]'
echo "$want" > .venv/.installed
