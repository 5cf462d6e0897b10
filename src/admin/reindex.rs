//! `strata reindex`: rebuild every index from the system of record with
//! the embedder now configured (the way to switch embedding models).

use chrono::Utc;
use serde::Serialize;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::runtime::{embedder_id, Components, Runtime, META_ANALYZER, META_EMBEDDER, META_REINDEXING};
use crate::store::factory;
use crate::typed::TypedMemories;

/// Result of [`reindex`].
#[derive(Debug, Clone, Serialize)]
pub struct ReindexReport {
    /// Episodes re-indexed.
    pub episodes: usize,
    /// Indexed typed memories (facts) re-indexed, private and shared tiers.
    pub memories: usize,
    /// Vector points written (summaries plus turn units).
    pub vector_points: usize,
    /// The embedder the indexes are now built with ("model (N dims)").
    pub embedder: String,
    /// Wall time, in seconds.
    pub seconds: f64,
}

/// Rebuilds every index (BM25 and vectors) from the system of record
/// with the embedder now configured: the way to switch embedding models.
/// Summaries and raw sessions are not touched (no LLM call is made).
/// Run it with no other process using `data_dir`. An interrupted reindex
/// is detected on the next open, which then asks for another one.
///
/// # Errors
/// [`Error::InvalidInput`] for an ephemeral store; embedder and store errors.
pub async fn reindex(config: Config, mut components: Components) -> Result<ReindexReport> {
    if components.ephemeral {
        return Err(Error::InvalidInput(
            "reindex needs a data_dir on disk".into(),
        ));
    }
    config.validate()?;
    let started = std::time::Instant::now();
    let embedder = match components.embedder.take() {
        Some(e) => e,
        None => crate::embed::load::embedder(&config).await?,
    };
    let embedder_id = embedder_id(embedder.as_ref());
    let dir = config.data_dir.clone();
    {
        let stores = factory::open_stores(&config, false).await?;
        stores.records.meta_set(META_REINDEXING, "1").await?;
        stores.records.meta_set(META_EMBEDDER, &embedder_id).await?;
        stores.records.meta_set(META_ANALYZER, crate::store::analyzer::VERSION).await?;
    }
    // the collection holds only indexes, rebuilt below (a new model may change the dimension)
    factory::drop_index_collection(&config).await?;
    tokio::task::spawn_blocking(move || -> Result<()> {
        // the shared tiers' indexes too: shared/public and shared/teams/<id>
        let shared = dir.join("shared");
        let mut tiers = vec![shared.join("public")];
        if let Ok(rd) = std::fs::read_dir(shared.join("teams")) {
            tiers.extend(rd.flatten().map(|e| e.path()));
        }
        let mut index_dirs: Vec<std::path::PathBuf> =
            ["keyword", "vectors", "knowledge"].iter().map(|s| dir.join(s)).collect();
        for t in tiers {
            index_dirs.extend(["keyword", "vectors"].iter().map(|s| t.join(s)));
        }
        for p in index_dirs {
            if p.exists() {
                std::fs::remove_dir_all(&p)?;
            }
        }
        Ok(())
    })
    .await??;
    components.embedder = Some(embedder);
    components.no_workers = true;
    let (shared, parts) = Runtime::open(config, components, false).await?;
    let typed = TypedMemories::open(&shared, parts);
    let (mut episodes, mut points, mut after) = (0usize, 0usize, None);
    let batch = shared.config.workers.batch_size;
    loop {
        let page = shared
            .records
            .all_episodes(after.clone(), batch, Utc::now())
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.1.id.clone());
        points += crate::worker::episodic::reindex_batch(&shared, &page).await?;
        episodes += page.len();
        tracing::info!(episodes, points, "reindexed");
    }
    shared.vectors.optimize().await?;
    let memories = typed.reindex().await?;
    tracing::info!(memories, "reindexed typed knowledge");
    shared.records.meta_set(META_REINDEXING, "0").await?;
    Ok(ReindexReport {
        episodes,
        memories,
        vector_points: points,
        embedder: embedder_id,
        seconds: started.elapsed().as_secs_f64(),
    })
}

