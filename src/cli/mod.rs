//! The `strata` command line: a thin client of the library.
//!
//! Global flags build the layered [`Config`] (default < `--config FILE` <
//! `STRATA__*` env < `--data-dir` / `--set key=value`); `run` dispatches each
//! subcommand to its group's file: `args` (the grammar), `recall` (search,
//! expand, inject), `typed`, `graph`, `keys`, `admin` (forget, jobs, usage,
//! check, backup, restore, reindex, prune), `import`, `migrate`, `demo`.
//! Data commands take `--user`/`--agent` and `--json`.

mod admin;
mod args;
mod demo;
mod graph;
pub mod import;
mod keys;
mod migrate;
mod recall;
pub mod typed;

pub use args::{Cli, Command, EvalCommand, GraphCommand, JobsCommand, KeysCommand, LogFormat, ModelCommand, PromptCommand, ScopeArgs};
use graph::graph_command;
use keys::keys_command;

use clap::Parser;
use std::process::ExitCode;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::memory::Components;
use crate::Memory;

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
        Command::Demo { file, json } => demo::run(config, file.as_deref(), json, cli.data_dir.is_some())
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
        } => recall::search(config, scope, query, top_k, visibility, json).await,
        Command::Expand {
            scope,
            id,
            raw,
            json,
        } => recall::expand(config, scope, id, raw, json).await,
        Command::Inject {
            scope,
            session,
            message,
            json,
        } => recall::inject(config, scope, session, message, json).await,
        Command::Graph { action } => graph_command(config, action).await,
        Command::Forget { user, json } => admin::forget(config, user, json).await,
        Command::Jobs {
            action: JobsCommand::List { limit, json },
        } => admin::jobs_list(config, limit, json).await,
        Command::Jobs {
            action: JobsCommand::Retry { id, all: _ },
        } => admin::jobs_retry(config, id).await,
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
        Command::Usage { user, agent, json } => admin::usage(config, user, agent, json).await,
        Command::Check { repair, json } => admin::check(config, repair, json).await,
        Command::Backup { dir, json } => admin::backup(config, dir, json).await,
        Command::Restore { dir, json } => admin::restore(config, dir, json).await,
        Command::Reindex { json } => admin::reindex(config, json).await,
        Command::Migrate { to, batch, reindex, json } => migrate::run(config, &to, batch, reindex, json).await,
        Command::Prune { json } => admin::prune(config, json).await,
    }
}
