//! Erasure of a user (`DELETE /v1/users/{user_id}`, `strata forget`):
//! every store, indexes first, so an interrupted erasure can be run again.

use serde::Serialize;
use std::collections::HashMap;

use crate::error::Result;
use crate::model::{EpisodeId, Scope};
use crate::runtime::Runtime;
use crate::typed::TypedMemories;

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
/// # Errors
/// [`crate::Error::InvalidInput`] for an empty or malformed user id; store errors.
pub async fn forget_user(rt: &Runtime, typed: &TypedMemories, user_id: &str) -> Result<ForgetReport> {
    // validates the id the same way every scope does
    Scope::new(user_id, "_")?;
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
    if !by_scope.is_empty() {
        // deleted documents must leave the disk too, not only the results
        rt.keyword.compact().await?;
        rt.vectors.compact().await?;
    }
    // typed knowledge leaves the indexes before its rows go with the records
    let (kw, vec) = typed.forget_user_indexes(user_id).await?;
    report.keyword_docs += kw;
    report.vector_points += vec;
    if kw + vec > 0 {
        typed.index().keyword.compact().await?;
        typed.index().vectors.compact().await?;
    }
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

