#!/usr/bin/env bash
# A throw-away Postgres cluster for Cage's tests, reachable on 127.0.0.1 and a Unix socket only.
#
#   scripts/ensure-postgres.sh          start it when it does not answer (installing Debian's
#                                       `postgresql` package first when missing), make sure the test
#                                       role and database exist, print the SQLAlchemy URL on stdout
#   scripts/ensure-postgres.sh status   exit 0 when it answers, non-zero otherwise (prints nothing)
#   scripts/ensure-postgres.sh stop     stop it (the data directory stays for the next start)
#   scripts/ensure-postgres.sh url      print the URL without checking anything
#
# Safe to run any number of times; returns fast when the cluster already answers.
# Knobs: CAGE_PG_PORT (55432), CAGE_PG_DATA (/tmp/cage-postgres), CAGE_PG_USER / CAGE_PG_PASSWORD /
# CAGE_PG_DB (cage / cage / cage_test). The role may create databases: tests make one per test.
set -euo pipefail

PORT="${CAGE_PG_PORT:-55432}"
DATA="${CAGE_PG_DATA:-/tmp/cage-postgres}"
ROLE="${CAGE_PG_USER:-cage}"
PASSWORD="${CAGE_PG_PASSWORD:-cage}"
DB="${CAGE_PG_DB:-cage_test}"
PGDATA_DIR="$DATA/data"
SOCKET_DIR="$DATA/run"
LOG_FILE="$DATA/postgres.log"

log() { printf 'cage: %s\n' "$*" >&2; }
url() { printf 'postgresql+asyncpg://%s:%s@127.0.0.1:%s/%s\n' "$ROLE" "$PASSWORD" "$PORT" "$DB"; }

pg_bin_dir() {
    local dir
    dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)"
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && printf '%s\n' "$dir"
}

# Run a command as the cluster owner: `postgres` when we are root (the server refuses to run as
# root), ourselves otherwise.
as_owner() {
    if [ "$(id -u)" = "0" ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

answers() {
    local bin
    bin="$(pg_bin_dir)" || return 1
    "$bin/pg_isready" -q -h "$SOCKET_DIR" -p "$PORT" >/dev/null 2>&1
}

install_postgres() {
    if [ "$(id -u)" != "0" ]; then
        log "Postgres is not installed and we are not root: install Debian's postgresql package, or set CAGE_TEST_POSTGRES_URL"
        exit 1
    fi
    log "installing postgresql (no initdb found)"
    export DEBIAN_FRONTEND=noninteractive
    # The package's default cluster is not wanted: ours lives under $DATA on its own port.
    if ! apt-get install -y -qq postgresql >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq postgresql >/dev/null
    fi
    if command -v pg_ctlcluster >/dev/null 2>&1; then
        for version in $(ls /etc/postgresql 2>/dev/null); do
            pg_ctlcluster "$version" main stop >/dev/null 2>&1 || true
        done
    fi
}

start_cluster() {
    local bin="$1"
    mkdir -p "$DATA" "$SOCKET_DIR"
    if [ "$(id -u)" = "0" ]; then
        chown postgres:postgres "$DATA" "$SOCKET_DIR"
    fi
    chmod 700 "$DATA"
    if [ ! -s "$PGDATA_DIR/PG_VERSION" ]; then
        log "creating a cluster in $PGDATA_DIR"
        as_owner "$bin/initdb" -D "$PGDATA_DIR" -U postgres -E UTF8 --locale=C.UTF-8 \
            --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    fi
    log "starting Postgres on 127.0.0.1:$PORT (log: $LOG_FILE)"
    # listen_addresses=127.0.0.1: never reachable from another machine.
    as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -l "$LOG_FILE" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $SOCKET_DIR -c fsync=off -c full_page_writes=off" \
        >/dev/null || { tail -20 "$LOG_FILE" >&2 || true; exit 1; }
}

psql_admin() {
    local bin
    bin="$(pg_bin_dir)"
    as_owner "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKET_DIR" -p "$PORT" -U postgres -d postgres "$@"
}

ensure_role_and_db() {
    local has_role has_db
    has_role="$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")"
    if [ "$has_role" != "1" ]; then
        psql_admin -c "CREATE ROLE \"$ROLE\" LOGIN CREATEDB PASSWORD '$PASSWORD'"
    fi
    has_db="$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")"
    if [ "$has_db" != "1" ]; then
        psql_admin -c "CREATE DATABASE \"$DB\" OWNER \"$ROLE\""
    fi
}

case "${1:-start}" in
    url)
        url
        ;;
    status)
        answers
        ;;
    stop)
        if answers; then
            log "stopping Postgres on port $PORT"
            as_owner "$(pg_bin_dir)/pg_ctl" -D "$PGDATA_DIR" -w -t 60 -m fast stop >/dev/null
        fi
        ;;
    start)
        if ! answers; then
            bin="$(pg_bin_dir)" || { install_postgres; bin="$(pg_bin_dir)"; }
            start_cluster "$bin"
        fi
        ensure_role_and_db
        url
        ;;
    *)
        log "usage: $0 [start|status|stop|url]"
        exit 2
        ;;
esac
