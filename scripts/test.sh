#!/usr/bin/env bash
# The whole test suite: fetches the embedding model if missing, starts a
# throwaway PostgreSQL on 127.0.0.1 (scripts/pg.sh; skipped when
# STRATA_TEST_POSTGRES_URL already names a server), then runs every unit,
# integration and doc test in the one dev profile (dependencies are
# optimised there, see Cargo.toml) and checks that the benches compile.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/fetch-model.sh
if [ -z "${STRATA_TEST_POSTGRES_URL:-}" ]; then
  eval "$(./scripts/pg.sh start)"
  trap './scripts/pg.sh stop' EXIT
fi
cargo test --lib --bins --tests "$@"
cargo test --doc "$@"
cargo test --benches --no-run "$@"
