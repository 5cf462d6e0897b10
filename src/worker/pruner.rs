//! Pruner: removes expired episodes (`expires_at` ≤ now) from the keyword
//! index, the vector index and the system of record, in that order, so a
//! crash midway is finished by the next run. Raw sessions and messages stay,
//! so any summary can be regenerated. Scheduled with tokio-cron-scheduler
//! (`pruner.cron`, default every 6 hours); `strata prune` runs it once.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::model::{EpisodeId, Scope};

/// What a prune run removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PruneReport {
    /// Expired episodes removed from every index and the record store.
    pub episodes_removed: usize,
    /// Scopes touched.
    pub scopes: usize,
}

/// Removes every episode expired at `now`.
pub async fn prune(shared: &Runtime, now: DateTime<Utc>) -> Result<PruneReport> {
    let mut report = PruneReport::default();
    // one node of a cluster prunes at a time; the others skip this run
    let Some(_lock) = shared.records.maintenance_lock("prune").await? else {
        tracing::info!("another node is pruning; skipped");
        return Ok(report);
    };
    loop {
        let expired = shared.records.expired_episodes(now, 1000).await?;
        if expired.is_empty() {
            break;
        }
        let mut by_scope: BTreeMap<String, (Scope, Vec<EpisodeId>)> = BTreeMap::new();
        for (scope, id) in expired {
            by_scope
                .entry(scope.key())
                .or_insert_with(|| (scope.clone(), Vec::new()))
                .1
                .push(id);
        }
        for (scope, ids) in by_scope.into_values() {
            shared.keyword.delete(&scope, &ids).await?;
            shared.vectors.delete(&scope, &ids).await?;
            report.episodes_removed += shared.records.delete_episodes(&scope, &ids).await?;
            report.scopes += 1;
            tracing::info!(scope = %scope, episodes = ids.len(), "pruned expired episodes");
        }
    }
    Ok(report)
}

/// Starts the cron schedule; the returned scheduler must be shut down on exit.
///
/// # Errors
/// [`Error::Config`] when `pruner.cron` does not parse.
pub async fn schedule(shared: Arc<Runtime>) -> Result<JobScheduler> {
    let cron = shared.config.pruner.cron.clone();
    let sched = JobScheduler::new()
        .await
        .map_err(|e| Error::Task(e.to_string()))?;
    // the job holds a weak reference: the stores close when `Memory` goes, not when the scheduler does
    let weak = Arc::downgrade(&shared);
    let job = Job::new_async(cron.as_str(), move |_id, _lock| {
        let weak = weak.clone();
        Box::pin(async move {
            let Some(shared) = weak.upgrade() else { return };
            if let Err(e) = prune(&shared, Utc::now()).await {
                tracing::error!(error = %e, "scheduled prune failed");
            }
        })
    })
    .map_err(|e| Error::Config(format!("pruner.cron {cron:?}: {e}")))?;
    sched
        .add(job)
        .await
        .map_err(|e| Error::Task(e.to_string()))?;
    sched
        .start()
        .await
        .map_err(|e| Error::Task(e.to_string()))?;
    Ok(sched)
}
