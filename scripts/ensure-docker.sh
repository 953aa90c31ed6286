#!/usr/bin/env bash
# Make sure a Docker engine answers. Installs docker.io and starts dockerd in the
# background when none runs and we are root; says clearly what is missing otherwise.
# Safe to run any number of times.
set -euo pipefail

log() { printf 'cage: %s\n' "$*" >&2; }

engine_answers() { docker info >/dev/null 2>&1; }

if engine_answers; then
    exit 0
fi

if [ -n "${DOCKER_HOST:-}" ]; then
    log "DOCKER_HOST=${DOCKER_HOST} is set but no engine answers there; not starting a local one."
    exit 1
fi

if [ "$(id -u)" != "0" ]; then
    log "no Docker engine answers and we are not root: start dockerd (or set DOCKER_HOST) and retry."
    exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io (no dockerd found)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
fi
if ! command -v docker >/dev/null 2>&1; then
    log "no docker client after install; giving up"
    exit 1
fi

mkdir -p /var/log/cage
if ! pgrep -x dockerd >/dev/null 2>&1; then
    log "starting dockerd in the background (log: /var/log/cage/dockerd.log)"
    # setsid: the daemon must outlive the make process that started it.
    setsid nohup dockerd >/var/log/cage/dockerd.log 2>&1 < /dev/null &
fi

for _ in $(seq 1 60); do
    if engine_answers; then
        log "Docker engine is up"
        exit 0
    fi
    sleep 0.5
done
log "dockerd did not answer within 30 s; see /var/log/cage/dockerd.log"
tail -20 /var/log/cage/dockerd.log >&2 || true
exit 1
