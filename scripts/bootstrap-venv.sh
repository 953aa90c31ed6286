#!/usr/bin/env bash
# Create .venv and install Cage with its dev extras from requirements.lock. Re-installs only when
# the lock or pyproject.toml changed.
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

# The lock pins every package (with hashes) to what `make test` was last green with; Cage itself is
# installed on top, editable, without resolving anything again.
want="$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
if [ "$(cat .venv/.installed 2>/dev/null || true)" = "$want" ]; then
    exit 0
fi
log "installing the locked packages (requirements.lock) and Cage into .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q --require-hashes -r requirements.lock
.venv/bin/python -m pip install -q --no-deps -e .
echo "$want" > .venv/.installed
