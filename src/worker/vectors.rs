//! Vector worker: `EpisodeVectors` → the vector units of an episode whose
//! promotion deferred them (`episodes.defer_vectors`).
//!
//! It runs inside the episodic worker's loop, only when no promotion job is
//! ready ([`super::run_promotion`]): a back-fill of many sessions is first
//! promoted (episode row, abstract, keyword document: searchable by keyword)
//! at the promotion rate, and then embedded, which on CPU is most of the cost
//! (docs/operations.md, "How promotion keeps up"). A session ended during a
//! back-fill waits for at most one vector batch (~7 s) before its promotion.
//!
//! Per batch of up to [`BATCH`] events: load each episode (gone or expired:
//! the job is finished with nothing to do) and its session's messages, embed
//! every unit of the batch in one call, upsert (one commit), finish the jobs.
//! Each episode is looked up again before its job ends and the points of any
//! that an erasure or the pruner removed meanwhile are deleted (a job whose
//! episode is gone deletes its points too), so an embedding that raced a
//! `forget_user` leaves nothing behind. Upserts are idempotent, so a
//! crash replays the batch to the same points. Failures retry with backoff,
//! then park, like every job.

use chrono::Utc;

use super::episodic::{index_vectors, IndexItem, SessionTexts};
use crate::error::Result;
use crate::runtime::Runtime;
use crate::model::{Episode, Scope};
use crate::store::{Event, EventKind};

/// Episodes per vector batch: about 22 texts each with turn units (LoCoMo
/// dev), so a batch is ~700 texts, ~7 s of embedding on two cores with the
/// int8 MiniLM: the longest a promotion that arrives during a back-fill
/// waits. Measured (docs/measurements.md "Promotion throughput", 195 sessions):
/// 8 episodes a batch index everything in 62 s, 16 in 64 s, 32 in 50 s, the
/// same as embedding inside promotion (51 s): smaller calls split worse over
/// the two cores.
pub const BATCH: usize = 32;

/// Processes one batch; returns how many events it took.
pub async fn drain(shared: &Runtime) -> Result<usize> {
    let events = shared
        .records
        .pending_events(&[EventKind::EpisodeVectors], BATCH)
        .await?;
    if events.is_empty() {
        return Ok(0);
    }
    let n = events.len();
    let now = Utc::now();
    let mut live: Vec<(crate::store::OutboxEvent, Scope, Episode, SessionTexts)> = Vec::new();
    for ev in events {
        let Event::EpisodeVectors { scope, episode_id } = &ev.event else {
            shared.records.finish_event(ev.id, vec![]).await?;
            continue;
        };
        let loaded = async {
            let episode = shared.records.episode(scope, episode_id, now).await?;
            let texts = SessionTexts::load(shared, scope, &episode).await?;
            Ok((episode, texts))
        }
        .await;
        match loaded {
            Ok((episode, texts)) => {
                let scope = scope.clone();
                live.push((ev, scope, episode, texts));
            }
            // expired or erased since: nothing to embed, and whatever a run
            // that crashed after its upsert left is deleted before the job ends
            Err(crate::Error::NotFound(_)) => {
                shared.vectors.delete(scope, std::slice::from_ref(episode_id)).await?;
                shared.records.finish_event(ev.id, vec![]).await?
            }
            Err(e) => fail(shared, &ev, &e).await?,
        }
    }
    if live.is_empty() {
        return Ok(n);
    }
    let items: Vec<IndexItem<'_>> = live
        .iter()
        .map(|(_, scope, episode, texts)| IndexItem {
            scope,
            episode,
            texts,
        })
        .collect();
    match index_vectors(shared, &items).await {
        Ok(points) => {
            tracing::debug!(episodes = live.len(), points, "deferred episode vectors written");
            for (ev, scope, episode, _) in &live {
                // an erasure (or the pruner) that ran while this batch was
                // embedded deleted the points before they existed: delete again
                // (before the job ends, so a crash here replays the check)
                match shared.records.episode(scope, &episode.id, Utc::now()).await {
                    Ok(_) => {}
                    Err(crate::Error::NotFound(_)) => {
                        shared
                            .vectors
                            .delete(scope, std::slice::from_ref(&episode.id))
                            .await?;
                    }
                    Err(e) => return Err(e),
                }
                crate::error::fail_point!("vectors.before_finish");
                shared.records.finish_event(ev.id, vec![]).await?;
            }
        }
        Err(e) => {
            tracing::warn!(episodes = live.len(), error = %e, "embedding deferred episode vectors failed");
            for (ev, ..) in &live {
                fail(shared, ev, &e).await?;
            }
        }
    }
    Ok(n)
}

async fn fail(shared: &Runtime, ev: &crate::store::OutboxEvent, e: &crate::Error) -> Result<()> {
    super::fail(shared, ev, e, super::park_after(e, shared.config.workers.max_attempts))
        .await
        .map(|_| ())
}
