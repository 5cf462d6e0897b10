#!/usr/bin/env bash
# The whole test suite: fetches the embedding model if missing, starts a
# throwaway PostgreSQL (scripts/pg.sh) and a throwaway Bolt graph server
# (scripts/graph-server.sh, ArcadeDB) on 127.0.0.1, each skipped when its
# variable (STRATA_TEST_POSTGRES_URL, STRATA_TEST_BOLT_URI) already names a
# server, installs the client tests' packages (scripts/client-deps.sh) and the
# console tests' browser (scripts/browser-deps.sh), then runs every unit, integration and doc test in the one dev
# profile (dependencies are optimised there, see Cargo.toml) and checks
# that the benches compile and the API docs build without a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/fetch-model.sh
# the client and SDK tests' Python venv and npm packages (target/clients-venv, clients/*/node_modules)
./scripts/client-deps.sh
export STRATA_REQUIRE_CLIENT_TESTS=1
# headless Chromium and chromedriver for the console's browser tests (tests/console.rs)
./scripts/browser-deps.sh
export STRATA_REQUIRE_BROWSER_TESTS=1
cleanup=()
stop() { for c in "${cleanup[@]}"; do $c || true; done; }
trap stop EXIT
if [ -z "${STRATA_TEST_POSTGRES_URL:-}" ]; then
  eval "$(./scripts/pg.sh start)"
  cleanup+=("./scripts/pg.sh stop")
fi
if [ -z "${STRATA_TEST_BOLT_URI:-}" ]; then
  eval "$(./scripts/graph-server.sh start)"
  cleanup+=("./scripts/graph-server.sh stop")
fi
if [ -z "${STRATA_TEST_QDRANT_URL:-}" ]; then
  # the tests' own SKIPPED lines are captured by the test harness when they pass: say it here
  echo "test.sh: SKIPPED: STRATA_TEST_QDRANT_URL is not set, so the Qdrant-server tests (store::conformance::backends::qdrant_server_*, tests/cluster.rs a_node_on_postgres_and_qdrant_*) pass without running (docs/scale.md, \"Testing against the servers\")" >&2
fi
# STRATA_CARGO_TIMINGS=1 (set by .ci/run) adds cargo's build timings (target/cargo-timings)
cargo test --features failpoints --lib --bins --tests ${STRATA_CARGO_TIMINGS:+--timings} "$@"
cargo test --features failpoints --doc "$@"
# the Python client against the strata binary the tests just built (clients/python/tests)
(cd clients/python && ../../target/clients-venv/bin/python -m pytest -q tests)
# the TypeScript client, and its generated types checked against /openapi.json
(cd clients/typescript && node --test test/client.test.js test/webhooks.test.js test/readme.test.js test/ai-sdk.test.js)
cargo test --features failpoints --benches --no-run "$@"
# the API docs build without a warning (broken or private links, bad HTML)
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
