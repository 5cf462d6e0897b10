#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for the tests (PostgreSQL 15
# ships on the machine image; Debian's `postgresql` package otherwise).
#   scripts/pg.sh start   initdb + start (reusing a running one); prints
#                         `export STRATA_TEST_POSTGRES_URL=...` for eval
#   scripts/pg.sh stop    stops it and removes its directory
# PostgreSQL refuses to run as root, so as root it runs as the `postgres`
# user. Trust authentication, loopback only, fsync off: test data only.
set -euo pipefail
cmd=${1:-start}
dir=${STRATA_PG_DIR:-/tmp/strata-test-pg}
port=${STRATA_PG_PORT:-55432}
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
bin=$(find_bin)
if [ -z "$bin" ] && [ "$cmd" = start ]; then
  echo "installing PostgreSQL (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) >&2
  bin=$(find_bin)
fi
[ -n "$bin" ] || { echo "no PostgreSQL binaries under /usr/lib/postgresql" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
  start)
    if [ ! -s "$dir/data/PG_VERSION" ]; then
      rm -rf "$dir"
      mkdir -p "$dir"
      [ "$(id -u)" = 0 ] && chown postgres: "$dir"
      as_pg "$bin/initdb" -D "$dir/data" -U strata --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    # a start that fails (seen once: the postmaster exited at once, its log
    # gone with the directory) shows its log and is tried once more
    for try in 1 2; do
      as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 && break
      if as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c max_connections=200" >&2; then
        break
      fi
      echo "pg.sh: start $try failed; its log:" >&2
      tail -n 20 "$dir/log" >&2 || true
      [ "$try" = 2 ] && exit 1
      sleep 2
    done
    echo "export STRATA_TEST_POSTGRES_URL=postgres://strata@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -s "$dir/data/PG_VERSION" ]; then
      as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
