//! Administration: what operators do to a running deployment — the outbox's
//! parked jobs and queue depths, LLM usage, store sizes (here); live
//! configuration reload ([`reload`]); index rebuild ([`reindex`]);
//! consistency check and repair ([`check`]); backup and restore
//! ([`backup`]); erasure of a user ([`erasure`]); migration of an embedded
//! deployment onto the cluster stores ([`migrate`]). API keys are in
//! [`crate::keys`].
//!
//! Architecture Invariant: these read and write through the store traits
//! and the runtime, never through [`crate::Memory`] (which delegates here).

pub mod backup;
pub mod check;
pub mod erasure;
pub mod migrate;
pub mod reindex;
pub mod reload;

use crate::error::{Error, Result};
use crate::graph::GraphCounts;
use crate::model::{EventId, Scope};
use crate::runtime::Runtime;
use crate::store::{EventKind, ParkedJob, StoreSizes, UsageTotals};

/// The dead-letter table: jobs that failed `workers.max_attempts` times,
/// with their last error, oldest first, at most `limit`. Operator tool
/// (it lists every scope's jobs, with ids and errors but no content).
///
/// # Errors
/// Store errors.
pub async fn parked_jobs(rt: &Runtime, limit: usize) -> Result<Vec<ParkedJob>> {
    rt.records.parked_jobs(limit).await
}

/// Re-queues one parked job (`Some(id)`) or all of them (`None`) with a
/// fresh attempt budget and wakes the workers. Returns how many were re-queued.
///
/// # Errors
/// [`Error::NotFound`] when `id` names no parked job; store errors.
pub async fn retry_jobs(rt: &Runtime, id: Option<EventId>) -> Result<usize> {
    let n = rt.records.retry_parked(id).await?;
    if let (Some(id), 0) = (id, n) {
        return Err(Error::NotFound(format!("parked job {}", id.0)));
    }
    // a parked job may be an extraction or a dedup as well as a promotion
    for k in crate::worker::kinds(&rt.config) {
        rt.bus.publish(k);
    }
    Ok(n)
}

/// LLM cost totals (calls, failed calls, tokens in and out, sessions) of
/// one scope, or of the whole store for `None` (operators).
///
/// # Errors
/// Store errors.
pub async fn llm_usage(rt: &Runtime, scope: Option<&Scope>) -> Result<UsageTotals> {
    rt.records.usage_totals(scope).await
}

/// Row counts of every store, over all scopes (operators, `/metrics`).
///
/// # Errors
/// Store errors.
pub async fn store_sizes(rt: &Runtime) -> Result<(StoreSizes, GraphCounts)> {
    Ok((rt.records.store_sizes().await?, rt.graph.total_counts().await?))
}

/// Jobs waiting in the outbox per worker (`episodic`, `vectors`: the
/// deferred embeddings, `semantic`, `dedup`, `webhooks`: deliveries), including those in retry
/// backoff (operators, `/metrics`).
///
/// # Errors
/// Store errors.
pub async fn queue_depths(rt: &Runtime) -> Result<Vec<(&'static str, usize)>> {
    let mut out = Vec::new();
    for (name, kind) in [
        ("episodic", EventKind::SessionCompleted),
        ("vectors", EventKind::EpisodeVectors),
        ("semantic", EventKind::EpisodeCreated),
        ("dedup", EventKind::EntityUpserted),
        ("webhooks", EventKind::WebhookDelivery),
    ] {
        out.push((name, rt.records.count_pending(&[kind]).await?));
    }
    Ok(out)
}
