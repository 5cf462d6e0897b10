//! Erasure of a user (`DELETE /v1/users/{user_id}`, `strata forget`):
//! every store, indexes first, so an interrupted erasure can be run again.

use serde::Serialize;
use std::collections::HashMap;

use crate::error::Result;
use crate::model::{EpisodeId, Scope};
use crate::runtime::Runtime;
use crate::typed::TypedMemories;

/// `meta` key: `1` while an erasure's deleted documents may still be in
/// the index files ([`forget_user`] sets it, [`purge`] clears it).
pub const META_PURGE_PENDING: &str = "erasure.purge_pending";

/// The deferred half of an erasure: when [`META_PURGE_PENDING`] is set,
/// rewrites the episodes' and the typed knowledge's keyword and vector
/// indexes so that deleted documents leave the disk, then clears the flag
/// if `unchanged()` still holds (no erasure arrived meanwhile; else the
/// flag stays for the next pass). Returns whether it rewrote anything.
///
/// # Errors
/// Store errors (the flag stays set; the next pass tries again).
pub async fn purge(rt: &Runtime, typed: &TypedMemories, unchanged: impl Fn() -> bool) -> Result<bool> {
    if rt.records.meta_get(META_PURGE_PENDING).await?.as_deref() != Some("1") {
        return Ok(false);
    }
    let started = std::time::Instant::now();
    rt.keyword.compact().await?;
    rt.vectors.compact().await?;
    typed.index().keyword.compact().await?;
    typed.index().vectors.compact().await?;
    if unchanged() {
        rt.records.meta_set(META_PURGE_PENDING, "0").await?;
    }
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "erased documents purged from the index files");
    Ok(true)
}

/// Result of [`forget_user`]: rows removed per store.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct ForgetReport {
    /// Scopes (agents) the user had episodes in.
    pub scopes: usize,
    /// Documents removed from the keyword index.
    pub keyword_docs: usize,
    /// Points removed from the vector index.
    pub vector_points: usize,
    /// Rows removed from the graph tables.
    pub graph: crate::store::DeleteCounts,
    /// Rows removed from the system of record, per table.
    pub records: crate::store::DeleteCounts,
    /// What the user had contributed to team and public stores, removed.
    pub shared: crate::typed::SharedErasure,
}

/// Erases a user (every agent) from every store: both indexes first, then
/// the graph, then the system of record (messages, sessions, episodes,
/// outbox, LLM cost rows, dedup log), so an interrupted erasure can be
/// run again. Returns rows removed per store and table.
///
/// The user is gone from every read when this returns. The indexes' files
/// still hold the deleted documents until [`purge`] rewrites them: a
/// rewrite costs the size of the whole index, not of the user, so it runs
/// after the answer (the caller's part; [`META_PURGE_PENDING`] stays set
/// until it has run, across a crash too).
///
/// # Errors
/// [`crate::Error::InvalidInput`] for an empty or malformed user id; store errors.
pub async fn forget_user(rt: &Runtime, typed: &TypedMemories, user_id: &str) -> Result<ForgetReport> {
    // validates the id the same way every scope does
    Scope::new(user_id, "_")?;
    // durable before the first delete: an erasure interrupted after it still
    // gets its purge, at the next open
    rt.records.meta_set(META_PURGE_PENDING, "1").await?;
    let episodes = rt.records.user_episodes(user_id).await?;
    let mut by_scope: HashMap<Scope, Vec<EpisodeId>> = HashMap::new();
    for (scope, id) in episodes {
        by_scope.entry(scope).or_default().push(id);
    }
    let mut report = ForgetReport::default();
    for (scope, ids) in &by_scope {
        let kw_before = rt.keyword.count(scope).await?;
        rt.keyword.delete(scope, ids).await?;
        let vec_before = rt.vectors.count(scope).await?;
        rt.vectors.delete(scope, ids).await?;
        report.keyword_docs += kw_before.saturating_sub(rt.keyword.count(scope).await?);
        report.vector_points += vec_before.saturating_sub(rt.vectors.count(scope).await?);
    }
    // typed knowledge leaves the indexes before its rows go with the records
    let (kw, vec) = typed.forget_user_indexes(user_id).await?;
    report.keyword_docs += kw;
    report.vector_points += vec;
    report.shared = typed.forget_user_shared(user_id).await?;
    crate::error::fail_point!("erasure.after_indexes");
    report.graph = rt.graph.delete_user_graph(user_id).await?;
    report.records = rt.records.delete_user_records(user_id).await?;
    report.scopes = by_scope.len();
    // announced once every store is clean (a crash before this line leaves
    // an erasure to run again, which then announces it)
    crate::webhook::Notifier::new(rt)
        .send(crate::webhook::user_erased(&rt.config.webhooks, user_id)?)
        .await?;
    tracing::info!(user_id, scopes = report.scopes, "user erased");
    Ok(report)
}


/// How long the purge task waits after an erasure before rewriting, so that
/// the erasures of those moments share one rewrite (each costs the whole
/// index). A shutdown does not wait for it. Chosen, not measured: far below
/// any erasure deadline, long enough to batch a burst.
pub const PURGE_COALESCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Erases a user ([`forget_user`]), then has the index files purged: by the
/// purge task after the answer ([`Purger::request`]), or inline for an
/// [`Purger::inline`] purger.
///
/// # Errors
/// As [`forget_user`] and, inline, [`purge`].
pub async fn erase(rt: &Runtime, typed: &TypedMemories, purger: &Purger, user_id: &str) -> Result<ForgetReport> {
    let report = forget_user(rt, typed, user_id).await?;
    if purger.inline {
        purge(rt, typed, || true).await?;
    } else {
        purger.request();
    }
    Ok(report)
}

/// Wakes the purge task after erasures: a generation count, so a purge
/// that ran while another erasure arrived leaves the flag for a next pass.
#[derive(Debug, Default)]
pub struct Purger {
    requested: std::sync::atomic::AtomicU64,
    wake: tokio::sync::Notify,
    /// No task serves it ([`Purger::inline`]): [`erase`] purges before it returns.
    inline: bool,
}

impl Purger {
    /// A purger without a task (a memory without workers): [`erase`] purges inline.
    pub fn inline() -> Self {
        Self { inline: true, ..Self::default() }
    }

    /// Asks for a purge (after an erasure, or at open for one a crash left).
    pub fn request(&self) {
        self.requested.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn generation(&self) -> u64 {
        self.requested.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Starts the purge task: it runs [`purge`] at start (an erasure a crash
/// interrupted), [`PURGE_COALESCE`] after a [`Purger::request`], and once more when `stop`
/// turns true, before it ends (so a shutdown leaves no erased document in
/// the files). A failed pass is logged and retried at the next wake-up.
pub fn spawn_purger(
    rt: std::sync::Arc<Runtime>,
    typed: std::sync::Arc<TypedMemories>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (std::sync::Arc<Purger>, tokio::task::JoinHandle<()>) {
    let purger = std::sync::Arc::new(Purger::default());
    let p = purger.clone();
    let task = tokio::spawn(async move {
        loop {
            let g = p.generation();
            if let Err(e) = purge(&rt, &typed, || p.generation() == g).await {
                tracing::warn!(error = %e, "purging erased documents failed; retried at the next erasure or shutdown");
            }
            if p.generation() != g {
                continue; // an erasure arrived during the pass
            }
            if *stop.borrow() {
                break;
            }
            tokio::select! {
                _ = p.wake.notified() => {
                    // erasures come in bursts: one rewrite serves those of the next moments
                    tokio::select! {
                        _ = tokio::time::sleep(PURGE_COALESCE) => {}
                        _ = stop.changed() => {}
                    }
                }
                r = stop.changed() => {
                    if r.is_err() {
                        break;
                    }
                }
            }
        }
    });
    (purger, task)
}
