//! # Strata
//!
//! A tiered conversational memory runtime. A chatbot backend calls
//! [`Memory::record`] on every message, [`Memory::inject`] on every user
//! turn (a short "## Memory Context" for the system prompt), and
//! [`Memory::end_session`] when a conversation ends; finished sessions are
//! summarised into searchable episodes in the background. The model gets
//! [`Memory::memory_search`] and [`Memory::memory_expand`] as tools.
//!
//! Tiers: *working* (raw messages of open sessions), *episodic* (one
//! summary per finished session with a one-line abstract, indexed by BM25 and
//! by vectors), and *semantic* (an entity/relation graph with validity dates).
//!
//! ```
//! use strata::{Config, Memory, NewMessage, Scope, SessionId};
//!
//! # #[tokio::main] async fn main() -> strata::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let mut config = Config::default(); // the model is read from embedding.models_home (`strata model fetch`)
//! config.data_dir = dir.path().to_path_buf();
//! let memory = Memory::open(config).await?;
//! let scope = Scope::new("mina", "assistant")?;
//! let s1 = SessionId::new("2026-03-02")?;
//! let t = chrono::Utc::now();
//! memory.record(&scope, &s1, NewMessage::user("I moved from Seattle to Portland last month.", t)).await?;
//! memory.end_session(&scope, &s1).await?;
//! memory.wait_idle().await?; // promotion is asynchronous
//!
//! let s2 = SessionId::new("2026-03-09")?;
//! let ctx = memory.inject(&scope, &s2, "Which city did I move to from Seattle?").await?;
//! println!("{}", ctx.section); // "## Memory Context", a label line, then "- [...] user: I moved from Seattle to Portland..." in a fenced `memory` block
//! let hits = memory.memory_search(&scope, "Portland move", 5).await?;
//! assert_eq!(hits[0].session_id, s1);
//! let full = memory.memory_expand(&scope, &hits[0].id, true).await?;
//! assert!(full.episode.summary.contains("Portland"));
//! memory.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//! Layers from the bottom (`tests/architecture.rs` checks the imports):
//! - [`model`]: scopes, ids, messages, sessions, episodes, typed memories
//!   (imports nothing internal but the errors and [`text`]).
//! - [`config`]: layered, validated configuration.
//! - [`llm`]: how to talk to a chat model (client, retries, JSON repair,
//!   prompt files); [`embed`]: the embedder trait, its models on ONNX
//!   Runtime and the OpenAI-compatible endpoint.
//! - [`store`]: the store traits, one folder or file per backend, and
//!   [`store::factory`], the only module that names a backend.
//! - [`graph`]: the graph trait, extraction ([`graph::extract::GraphExtractor`]:
//!   offline patterns or a chat model), dedup rules and L2 search.
//! - [`recall`]: trivial filter, recall query, calibrated fusion, abstracts
//!   (pure); [`summary`]: the session summariser ([`summary::Summarizer`]:
//!   extractive or a chat model).
//! - `bus`: flume wake-ups over the durable outbox.
//! - [`runtime`]: what the capabilities and the workers share.
//! - Capabilities: [`episodic`] (record, inject, search, expand, the Memory
//!   Context), [`typed`] (typed memories and sharing tiers), [`admin`]
//!   (jobs, reload, reindex, check, backup, erasure, migrate), [`keys`].
//! - [`worker`]: episodic promotion, deferred vectors, extraction, dedup,
//!   idle sweeper, pruner.
//! - [`memory`]: the [`Memory`] facade, which wires the above and delegates.
//! - [`server`] (`strata serve`: REST + OpenAPI, MCP, auth, metrics; the only
//!   module that knows HTTP), [`cli`] (the `strata` command line) and
//!   [`eval`] (LoCoMo and LongMemEval replay, BM25 baseline, metrics).
#![warn(missing_docs)]

// The API: what a library user needs. `Memory` and its request and answer
// types (`memory`), `Config`, the model types, and the traits to plug in
// custom parts: the store traits (`store`, `graph::GraphStore`), the
// embedder (`embed::Embedder`), the summariser (`summary::Summarizer`) and
// the graph extractor (`graph::extract::GraphExtractor`).
pub mod config;
pub mod embed;
pub mod graph;
pub mod memory;
pub mod model;
pub mod store;
pub mod summary;

// Not API: public only for the `strata` binary, the integration tests and
// the benches, hidden from the documentation, with no stability promise.
#[doc(hidden)]
pub mod admin;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod episodic;
#[doc(hidden)]
pub mod eval;
#[doc(hidden)]
pub mod keys;
#[doc(hidden)]
pub mod llm;
#[doc(hidden)]
pub mod recall;
#[doc(hidden)]
pub mod runtime;
#[doc(hidden)]
pub mod server;
#[doc(hidden)]
pub mod text;
#[doc(hidden)]
pub mod typed;
#[doc(hidden)]
pub mod webhook;
#[doc(hidden)]
pub mod worker;

// Internal.
mod bus;
mod error;

pub use config::Config;
pub use error::{Error, Result};
pub use memory::{InjectResult, Memory, SearchHit};
pub use model::{Episode, EpisodeId, EpisodeRef, NewMessage, Role, Scope, SessionId};
