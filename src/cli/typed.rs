//! `strata remember`, `retrieve`, `share`, `forget-memory`: typed memories
//! from the command line (thin wrappers over [`crate::Memory`]).

use clap::{Args, ValueEnum};

use super::{open_for_reads, print_json, ScopeArgs};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::filter::Direction;
use crate::model::typed::{MemoryId, MemoryInput, NewMemory, ReadVisibility, Visibility};
use crate::typed::RetrieveRequest;

/// `strata remember`.
#[derive(Debug, Args)]
pub struct RememberArgs {
    /// Scope.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// fact, event, entity or relation.
    #[arg(long = "type")]
    pub memory_type: String,
    /// The memory's text.
    pub content: String,
    /// The type's metadata, a JSON object (e.g. '{"category": "preference"}').
    #[arg(long, default_value = "{}")]
    pub metadata: String,
    /// Keep a fact out of the keyword and vector indexes.
    #[arg(long)]
    pub no_index: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Sort direction on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Dir {
    /// Smallest / oldest first.
    Asc,
    /// Largest / newest first.
    Desc,
}

/// Stores read on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Reads {
    /// The user's private store.
    Private,
    /// Private + the user's teams + public.
    All,
}

impl From<Reads> for ReadVisibility {
    fn from(r: Reads) -> Self {
        match r {
            Reads::Private => ReadVisibility::Private,
            Reads::All => ReadVisibility::All,
        }
    }
}

/// `strata retrieve`.
#[derive(Debug, Args)]
pub struct RetrieveArgs {
    /// Scope.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Filter, a JSON object (e.g. '{"type": "event", "metadata.action": "purchase"}').
    #[arg(long, default_value = "{}")]
    pub filter: String,
    /// Rank the filtered facts by similarity to this text.
    #[arg(long)]
    pub query: Option<String>,
    /// Order by a path (created_at, updated_at, metadata.KEY).
    #[arg(long)]
    pub sort_by: Option<String>,
    /// Direction of --sort-by.
    #[arg(long, value_enum, default_value = "desc")]
    pub direction: Dir,
    /// Page size (1..=1000).
    #[arg(long, default_value_t = crate::typed::DEFAULT_RETRIEVE_TOP_K)]
    pub top_k: usize,
    /// The next_cursor printed by the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Include facts superseded by a newer one with the same key.
    #[arg(long)]
    pub include_superseded: bool,
    /// Which stores to read.
    #[arg(long, value_enum, default_value = "private")]
    pub visibility: Reads,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// `strata share`.
#[derive(Debug, Args)]
#[group(id = "to", required = true, multiple = false)]
pub struct ShareArgs {
    /// Scope.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// The private memory (`mem_...`).
    pub id: String,
    /// Share with this team (configured in `[teams]`); or give `--public`.
    #[arg(long, group = "to")]
    pub team: Option<String>,
    /// Share with every user of the agent; or give `--team`.
    #[arg(long, group = "to")]
    pub public: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// `strata forget-memory`.
#[derive(Debug, Args)]
pub struct ForgetMemoryArgs {
    /// Scope.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// The memory (`mem_...`).
    pub id: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

fn json_arg(name: &str, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::InvalidInput(format!("--{name} is not valid JSON: {e}")))
}

/// Runs `strata remember`.
pub async fn remember(config: Config, a: RememberArgs) -> Result<()> {
    let scope = a.scope.scope()?;
    let m = NewMemory::try_from(MemoryInput {
        memory_type: a.memory_type,
        content: a.content,
        metadata: json_arg("metadata", &a.metadata)?,
        indexed: a.no_index.then_some(false),
    })?;
    let mem = open_for_reads(config).await?;
    let r = mem.remember(&scope, m).await;
    mem.shutdown().await?;
    let r = r?;
    if a.json {
        print_json(&r)?;
    } else {
        println!(
            "{} ({} stored as {}{}; {:?})",
            r.id,
            r.memory_type.as_str(),
            r.category.as_str(),
            if r.indexed { ", indexed" } else { "" },
            r.outcome
        );
    }
    Ok(())
}

/// Runs `strata retrieve`.
pub async fn retrieve(config: Config, a: RetrieveArgs) -> Result<()> {
    let scope = a.scope.scope()?;
    let req = RetrieveRequest {
        filter: json_arg("filter", &a.filter)?,
        query: a.query,
        sort_by: a.sort_by,
        direction: match a.direction {
            Dir::Asc => Direction::Asc,
            Dir::Desc => Direction::Desc,
        },
        top_k: Some(a.top_k),
        cursor: a.cursor,
        include_superseded: a.include_superseded,
        visibility: a.visibility.into(),
    };
    let mem = open_for_reads(config).await?;
    let r = mem.retrieve(&scope, &req).await;
    mem.shutdown().await?;
    let r = r?;
    if a.json {
        return print_json(&r);
    }
    if r.memories.is_empty() {
        println!("(no memories match)");
    }
    for m in &r.memories {
        let score = m.score.map(|s| format!(" {s:.3}")).unwrap_or_default();
        println!(
            "{} [{} {}]{score} {}\n    {}",
            m.id,
            m.memory_type.as_str(),
            m.source.label(),
            m.content,
            m.metadata
        );
    }
    if let Some(c) = &r.next_cursor {
        println!("next page: --cursor {c}");
    }
    Ok(())
}

/// Runs `strata share`.
pub async fn share(config: Config, a: ShareArgs) -> Result<()> {
    let scope = a.scope.scope()?;
    let id = MemoryId::parse(&a.id)?;
    let to = match a.team {
        Some(t) => Visibility::Team(t),
        None => Visibility::Public,
    };
    let mem = open_for_reads(config).await?;
    let r = mem.share(&scope, &id, &to).await;
    mem.shutdown().await?;
    let r = r?;
    if a.json {
        print_json(&r)?;
    } else {
        println!("{} shared to {} as {} ({:?})", r.memory_id, r.visibility.label(), r.shared_id, r.outcome);
    }
    Ok(())
}

/// Runs `strata forget-memory`.
pub async fn forget_memory(config: Config, a: ForgetMemoryArgs) -> Result<()> {
    let scope = a.scope.scope()?;
    let id = MemoryId::parse(&a.id)?;
    let mem = open_for_reads(config).await?;
    let r = mem.forget_memory(&scope, &id).await;
    mem.shutdown().await?;
    let r = r?;
    if a.json {
        print_json(&r)?;
    } else {
        println!(
            "forgot {} ({} from {}): {} keyword documents, {} vector points, graph {:?}",
            r.id,
            r.memory_type.as_str(),
            r.source.label(),
            r.keyword_docs,
            r.vector_points,
            r.graph.rows
        );
    }
    Ok(())
}
