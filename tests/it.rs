//! The integration tests, one binary: each module is one file beside this one
//! (`tests/server.rs` is `server`), all sharing `common`. `cargo test --test it
//! server::` runs one of them. `failpoints`, `crash` and `fuzz` are binaries of
//! their own (Cargo.toml, `[[test]]`).

mod common;

mod architecture;
mod cli;
mod cluster;
mod console;
mod embedder;
mod graph;
mod llm;
mod memory;
mod proxy;
mod scope_isolation;
mod server;
mod typed;
mod webhooks;
