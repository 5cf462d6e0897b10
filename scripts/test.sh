#!/usr/bin/env bash
# The whole test suite: fetches the embedding model if missing, then runs
# every unit, integration and doc test in the one dev profile (dependencies
# are optimised there, see Cargo.toml) and checks that the benches compile.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/fetch-model.sh
cargo test --lib --bins --tests "$@"
cargo test --doc "$@"
cargo test --benches --no-run "$@"
