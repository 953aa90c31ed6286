#!/usr/bin/env bash
# Make sure the base image `cage/base:bookworm` exists.
# 1. already there -> nothing to do;
# 2. `debian:bookworm-slim` can be pulled -> tag it;
# 3. otherwise (offline machines) -> debootstrap --variant=minbase bookworm + docker import.
# Safe to run any number of times; a concurrent second run waits on a lock.
set -euo pipefail

TAG="${CAGE_BASE_IMAGE:-cage/base:bookworm}"
MIRROR="${CAGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log() { printf 'cage: %s\n' "$*" >&2; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
    exit 0
fi

exec 9>"/tmp/cage-base-image.lock"
flock 9
if docker image inspect "$TAG" >/dev/null 2>&1; then
    exit 0
fi

if timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    docker tag debian:bookworm-slim "$TAG"
    log "tagged debian:bookworm-slim as $TAG"
    exit 0
fi

if [ "$(id -u)" != "0" ]; then
    log "debian:bookworm-slim cannot be pulled and building $TAG with debootstrap needs root"
    exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq debootstrap >/dev/null
fi

ROOT="$(mktemp -d /tmp/cage-rootfs.XXXXXX)"
trap 'rm -rf "$ROOT"' EXIT
log "building $TAG with debootstrap from $MIRROR (about 30-60 s)"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >/tmp/cage-debootstrap.log 2>&1 || {
    log "debootstrap failed; see /tmp/cage-debootstrap.log"
    tail -20 /tmp/cage-debootstrap.log >&2
    exit 1
}
# Same trims as the official slim image: no apt lists, no caches.
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$MIRROR" "$MIRROR" > "$ROOT/etc/apt/sources.list"
tar -C "$ROOT" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$TAG" >/dev/null
log "built $TAG"
