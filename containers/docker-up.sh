#!/usr/bin/env bash
# Make a Docker daemon reachable for `docker` (make image, make test-containers, .ci/run).
#
#   containers/docker-up.sh        # idempotent: exits 0 at once when `docker info` works
#
# When `docker info` fails: install Debian's docker.io if dockerd is missing (root only:
# apt-get update + apt-get install --no-install-recommends docker.io, ~20 s), then start a
# private dockerd without systemd, iptables or a bridge (containers use --network host or
# none), on the default socket /var/run/docker.sock, or on DOCKER_HOST when that is a
# unix:// address, so that a plain `docker` sees the same daemon and images afterwards.
# Data under /var/lib/docker (DOCKER_DATA_ROOT), log in /var/log/r2a-dockerd.log
# (DOCKERD_LOG), pid in /var/run/r2a-dockerd.pid (what containers/docker-down.sh stops).
# Anything missing: one line naming it and the command that makes it, exit 1.
set -euo pipefail

DATA_ROOT=${DOCKER_DATA_ROOT:-/var/lib/docker}
LOG=${DOCKERD_LOG:-/var/log/r2a-dockerd.log}
PIDFILE=${DOCKERD_PIDFILE:-/var/run/r2a-dockerd.pid}
WAIT_S=${DOCKERD_WAIT_S:-30}

die() { echo "docker-up: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 && exit 0

if [ -n "${DOCKER_HOST:-}" ]; then
  case "$DOCKER_HOST" in
    unix://*) SOCK=${DOCKER_HOST#unix://} ;;
    *) die "DOCKER_HOST=$DOCKER_HOST does not answer (docker info failed) and is not a local unix:// socket this script could start a daemon on; start that daemon, or unset DOCKER_HOST" ;;
  esac
else
  SOCK=/var/run/docker.sock
fi

if ! command -v dockerd >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "no dockerd and not root: install Docker (as root: apt-get update && apt-get install -y --no-install-recommends docker.io), or point DOCKER_HOST at a running daemon"
  command -v apt-get >/dev/null 2>&1 || die "no dockerd and no apt-get: install Docker Engine for this OS (https://docs.docker.com/engine/install/)"
  echo "docker-up: installing Debian's docker.io (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed (no package mirror?): install docker.io by hand"
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null \
    || die "apt-get install docker.io failed: run apt-get install -y --no-install-recommends docker.io to see why"
fi
command -v docker >/dev/null 2>&1 || die "dockerd is installed but no docker CLI is: apt-get install -y --no-install-recommends docker.io"
[ "$(id -u)" = 0 ] || die "docker info fails and starting dockerd needs root: start the Docker daemon (sudo dockerd ...) or set DOCKER_HOST"

if [ -e "$SOCK" ] && ! docker -H "unix://$SOCK" info >/dev/null 2>&1; then
  # a stale socket from a daemon that died; a live one would have answered
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    die "dockerd (pid $(cat "$PIDFILE")) runs but $SOCK does not answer: see $LOG"
  fi
  rm -f "$SOCK"
fi

mkdir -p "$DATA_ROOT" "$(dirname "$SOCK")" "$(dirname "$LOG")"
echo "docker-up: starting dockerd on unix://$SOCK (data $DATA_ROOT, log $LOG)" >&2
# setsid: the daemon outlives this script and the make that called it
setsid dockerd --host "unix://$SOCK" --data-root "$DATA_ROOT" --pidfile "$PIDFILE" \
  --iptables=false --ip6tables=false --bridge=none >>"$LOG" 2>&1 </dev/null &
for _ in $(seq $((WAIT_S * 10))); do
  docker -H "unix://$SOCK" info >/dev/null 2>&1 && { echo "docker-up: dockerd ready (pid $(cat "$PIDFILE" 2>/dev/null))" >&2; exit 0; }
  sleep 0.1
done
die "dockerd did not answer on unix://$SOCK within ${WAIT_S}s: see $LOG (tail: $(tail -n1 "$LOG" 2>/dev/null))"
