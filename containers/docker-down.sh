#!/usr/bin/env bash
# Stop the private dockerd that containers/docker-up.sh started (CI's trap). Leaves any other
# daemon alone: it acts only on the pid file docker-up.sh wrote. Idempotent.
set -uo pipefail
PIDFILE=${DOCKERD_PIDFILE:-/var/run/r2a-dockerd.pid}
WAIT_S=${DOCKERD_WAIT_S:-30}
[ -f "$PIDFILE" ] || exit 0
pid=$(cat "$PIDFILE")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq $((WAIT_S * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker-down: dockerd (pid $pid) still runs after ${WAIT_S}s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  echo "docker-down: dockerd (pid $pid) stopped" >&2
fi
rm -f "$PIDFILE"
