//! `strata migrate`: moves an embedded deployment (SQLite records, typed
//! memories and shared tiers, the SQLite graph) onto the cluster stores a
//! second config names (PostgreSQL records; the graph on a Bolt server or
//! in the target's own SQLite file; keyword and vector indexes wherever
//! the target puts them).
//!
//! Order: records first ([`crate::store::copy`]: table by table, in
//! batches, each committed with its checkpoint), then the graph scope by
//! scope ([`GraphStore::export_graph`] → [`GraphStore::import_graph`],
//! idempotent), then every index rebuilt from the copied records
//! ([`super::reindex::reindex`] on the target config: the indexes are derived
//! data, so they are made, not copied), then counts compared. Each phase
//! leaves a mark in the target's `meta` (`migrate.graph.scopes`,
//! `migrate.indexes`), so a copy killed anywhere and run again goes on
//! where it stopped and redoes nothing that was committed.
//!
//! The source is left as it was: it remains a way back. Stop every Strata
//! process using the source before migrating (rows written during the copy
//! may be missed; the final count check reports them).

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, RecordsBackend};
use crate::error::{Error, Result};
use crate::graph::{GraphCounts, GraphStore};
use crate::model::Scope;
use crate::runtime::Components;
use crate::store::copy::{CopySource, CopyTarget, TableCount};
use crate::store::factory;
use super::reindex::{reindex, ReindexReport};

/// `meta` key: how many graph scopes (in [`GraphStore::graph_scopes`] order) are copied.
const META_GRAPH: &str = "migrate.graph.scopes";
/// `meta` key: set once the indexes were rebuilt.
const META_INDEXES: &str = "migrate.indexes";

/// Options of [`migrate`].
#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// Rows per batch (and per PostgreSQL transaction) of the record copy
    /// (`--batch`, default 1000: a few hundred kB of JSON per statement; ≥ 1).
    pub batch: usize,
    /// Rebuild the target's indexes even when an earlier run did (`--reindex`):
    /// for indexes lost or damaged since.
    pub reindex: bool,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self { batch: 1000, reindex: false }
    }
}

/// What [`migrate`] reports while it works, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub enum MigrateEvent {
    /// A phase begins: `records` (unit: rows), `graph` (scopes), `indexes`
    /// (no total: the reindex logs its own progress), with its total units.
    Phase {
        /// Phase name.
        name: &'static str,
        /// Units of work in the phase (0 when unknown).
        total: u64,
        /// Units done by an earlier, interrupted run.
        done: u64,
    },
    /// Units just completed in the current phase.
    Advance(u64),
}

/// The graph part of a [`MigrateReport`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct GraphCopyReport {
    /// Where the graph went: `neo4j` (the target's Bolt server) or
    /// `sqlite` (the target's `data_dir/strata.db`).
    pub target: String,
    /// Scopes holding graph rows.
    pub scopes: usize,
    /// Totals over those scopes in the source.
    pub source: GraphCounts,
    /// The same in the target.
    pub target_counts: GraphCounts,
}

/// Result of [`migrate`].
#[derive(Debug, Clone, Serialize)]
pub struct MigrateReport {
    /// True when this run went on with a copy begun earlier.
    pub resumed: bool,
    /// Rows this run copied (0 when an earlier run copied them all).
    pub copied_rows: u64,
    /// Rows per (tier, table) in the source and in the target.
    pub tables: Vec<TableCount>,
    /// The graph copy.
    pub graph: GraphCopyReport,
    /// The index rebuild of this run (`None` when an earlier run did it).
    pub reindex: Option<ReindexReport>,
    /// Every count that differs between source and target; empty when the
    /// copy is complete.
    pub problems: Vec<String>,
    /// Wall time of this run, in seconds.
    pub seconds: f64,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// The source's graph and files (see [`factory::migration_source`]), the
/// files' paths absolute.
async fn sources(source: &Config) -> Result<(Arc<dyn GraphStore>, Vec<CopySource>)> {
    let (graph, mut files) = factory::migration_source(source).await?;
    for f in &mut files {
        f.path = absolute(&f.path);
    }
    Ok((graph, files))
}

/// Copies the deployment `source` describes (embedded records) into the
/// stores `target` describes (PostgreSQL records), rebuilds the target's
/// indexes, and compares counts; `progress` hears of each phase and batch.
/// Run again after an interruption: it resumes.
///
/// # Errors
/// [`Error::Config`] when `source` is not on SQLite records, `target` not
/// on PostgreSQL records, both share a `data_dir`, the source directory
/// holds no deployment, or the target already holds other records;
/// [`Error::Unavailable`] when a target server cannot be reached; store and
/// embedder errors. A count that differs at the end is not an error: it is
/// listed in [`MigrateReport::problems`].
pub async fn migrate(
    source: &Config,
    target: Config,
    options: &MigrateOptions,
    components: Components,
    progress: &mut (dyn FnMut(MigrateEvent) + Send),
) -> Result<MigrateReport> {
    let started = std::time::Instant::now();
    if source.stores.records != RecordsBackend::Sqlite {
        return Err(Error::Config("the source of a migration must be an embedded deployment (stores.records = \"sqlite\")".into()));
    }
    if target.stores.records != RecordsBackend::Postgres {
        return Err(Error::Config(
            "the target config of a migration must keep its records in PostgreSQL (stores.records = \"postgres\")".into(),
        ));
    }
    let (src_dir, dst_dir) = (absolute(&source.data_dir), absolute(&target.data_dir));
    if src_dir.starts_with(&dst_dir) || dst_dir.starts_with(&src_dir) {
        return Err(Error::Config(format!(
            "source data_dir {} and target data_dir {} overlap; give the target config a directory of its own \
             (its local files must not replace the source's)",
            src_dir.display(),
            dst_dir.display()
        )));
    }
    if options.batch == 0 {
        return Err(Error::InvalidInput("--batch must be at least 1 row".into()));
    }
    target.validate()?;
    let (source_graph, files) = sources(source).await?;
    let pg = factory::copy_target(&target).await?;
    // every target server is reached before anything is copied
    let graph_target = factory::graph_store(&target, false).await?;

    // 1. records
    let plan = pg.plan(files, options.batch).await?;
    let total: u64 = plan.steps.iter().map(|s| s.rows).sum();
    progress(MigrateEvent::Phase { name: "records", total, done: 0 });
    let mut copied_rows = 0;
    for i in 0..plan.steps.len() {
        let n = pg.copy_step(&plan, i, &mut |n| progress(MigrateEvent::Advance(n))).await?;
        copied_rows += n;
        tracing::info!(tier = %plan.steps[i].tier, table = %plan.steps[i].table, rows = n, "copied");
    }
    pg.finish(&plan).await?;

    // 2. graph
    let graph = copy_graph(graph_target, source_graph.as_ref(), pg.as_ref(), progress).await?;

    // 3. indexes, rebuilt from the copied records
    let reindex = if options.reindex || pg.meta_get(META_INDEXES).await?.is_none() {
        progress(MigrateEvent::Phase { name: "indexes", total: 0, done: 0 });
        let r = reindex(target.clone(), components).await?;
        pg.meta_set(META_INDEXES, &chrono::Utc::now().to_rfc3339()).await?;
        Some(r)
    } else {
        None
    };

    // 4. counts
    let tables = pg.verify(&plan).await?;
    let mut problems: Vec<String> = tables
        .iter()
        .filter(|t| t.source != t.target)
        .map(|t| format!("{} {}: {} rows in the source, {} in the target", t.tier, t.table, t.source, t.target))
        .collect();
    if graph.source != graph.target_counts {
        let c = |g: &GraphCounts| format!("{} entities, {} relations, {} merges", g.entities, g.relations, g.merges);
        problems.push(format!("graph: {} in the source, {} in the target", c(&graph.source), c(&graph.target_counts)));
    }
    Ok(MigrateReport { resumed: plan.resumed, copied_rows, tables, graph, reindex, problems, seconds: started.elapsed().as_secs_f64() })
}

fn add(a: GraphCounts, b: GraphCounts) -> GraphCounts {
    GraphCounts {
        entities: a.entities + b.entities,
        relations: a.relations + b.relations,
        invalidated: a.invalidated + b.invalidated,
        merges: a.merges + b.merges,
    }
}

async fn copy_graph(
    (to, kind): (Arc<dyn GraphStore>, &'static str),
    from: &dyn GraphStore,
    pg: &dyn CopyTarget,
    progress: &mut (dyn FnMut(MigrateEvent) + Send),
) -> Result<GraphCopyReport> {
    let scopes: Vec<Scope> = from.graph_scopes().await?;
    // a graph holding scopes the source has not is another deployment's: never mix them
    let foreign = to.graph_scopes().await?.into_iter().filter(|s| !scopes.contains(s)).count();
    if foreign > 0 {
        return Err(Error::Config(format!(
            "the target graph ({kind}) already holds {foreign} scopes that this deployment has not; migrate into an empty graph database"
        )));
    }
    let done: usize = pg.meta_get(META_GRAPH).await?.and_then(|v| v.parse().ok()).unwrap_or(0).min(scopes.len());
    progress(MigrateEvent::Phase { name: "graph", total: scopes.len() as u64, done: done as u64 });
    for (i, scope) in scopes.iter().enumerate().skip(done) {
        let dump = from.export_graph(scope).await?;
        to.import_graph(scope, &dump).await?;
        pg.meta_set(META_GRAPH, &(i + 1).to_string()).await?;
        progress(MigrateEvent::Advance(1));
    }
    let mut report = GraphCopyReport { target: kind.into(), scopes: scopes.len(), ..Default::default() };
    for scope in &scopes {
        let want = from.graph_counts(scope).await?;
        let mut got = to.graph_counts(scope).await?;
        if got != want {
            // lost or damaged since an earlier run copied it: imports are idempotent, so copy it again
            tracing::warn!(user_id = scope.user_id(), agent_id = scope.agent_id(), "graph scope differs from the source; importing it again");
            to.import_graph(scope, &from.export_graph(scope).await?).await?;
            got = to.graph_counts(scope).await?;
        }
        report.source = add(report.source, want);
        report.target_counts = add(report.target_counts, got);
    }
    Ok(report)
}
