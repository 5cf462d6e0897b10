//! Semantic worker: `EpisodeCreated` → entities and relations in the graph.
//!
//! Per event: load the episode and its session; extract with the runtime's
//! [`crate::graph::extract::GraphExtractor`] (the offline patterns, or a chat
//! model combined with them); apply to the [`crate::graph::GraphStore`] (idempotent
//! upserts, temporal invalidation); then mark the event done and write one
//! `EntityUpserted` per touched entity in one transaction. A crash between
//! the extraction and the upsert replays the event: deterministic ids make
//! the graph end up the same. Failures retry with backoff, then park.

use chrono::Utc;
use std::sync::Arc;

use crate::error::Result;
use crate::llm::{CallLog, TranscriptTurn};
use crate::runtime::Runtime;
use crate::store::{Event, EventKind, OutboxEvent};

/// Runs until stopped.
pub async fn run(
    shared: Arc<Runtime>,
    wake: flume::Receiver<()>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::serve(
        shared,
        &[EventKind::EpisodeCreated],
        wake,
        stop,
        |s| async move { drain(&s).await },
    )
    .await
}

/// Processes one batch; returns how many events it took.
pub async fn drain(shared: &Runtime) -> Result<usize> {
    super::drain_each(
        shared,
        EventKind::EpisodeCreated,
        "entity extraction",
        |s, e| Box::pin(process(s, e)),
    )
    .await
}

async fn process(shared: &Runtime, ev: &OutboxEvent) -> Result<()> {
    let Event::EpisodeCreated { scope, episode_id } = &ev.event else {
        return shared.records.finish_event(ev.id, vec![]).await;
    };
    let episode = match shared.records.episode(scope, episode_id, Utc::now()).await {
        Ok(e) => e,
        // expired or erased since: nothing to extract
        Err(crate::Error::NotFound(_)) => return shared.records.finish_event(ev.id, vec![]).await,
        Err(e) => return Err(e),
    };
    let messages = match shared.records.messages(scope, &episode.session_id).await {
        Ok(m) => m,
        Err(crate::Error::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    let turns: Vec<TranscriptTurn> = messages.iter().map(TranscriptTurn::from).collect();
    let mut speakers: Vec<String> = Vec::new();
    for t in &turns {
        if !speakers.contains(&t.speaker) {
            speakers.push(t.speaker.clone());
        }
    }
    let log = CallLog::default();
    let llm = shared
        .extractor
        .extract(
            &episode.summary,
            &turns,
            &speakers,
            &episode.started_at.format("%Y-%m-%d").to_string(),
            &log,
        )
        .await;
    if let Err(e) = shared
        .records
        .record_llm_calls(scope, Some(&episode.session_id), Some(ev.id), log.take())
        .await
    {
        tracing::warn!(event_id = %ev.id, error = %e, "could not record LLM usage");
    }
    let extraction = llm?;
    let report = shared
        .graph
        .apply_extraction(
            scope,
            episode_id,
            episode.started_at,
            &extraction,
            &crate::graph::ApplyRules::from_config(&shared.config.graph),
        )
        .await?;
    tracing::debug!(episode_id = %episode_id, entities = report.entities.len(), relations = report.relations, invalidated = report.invalidated, "graph updated");
    // an erasure that ran while this episode was extracted took its session
    // (only erasure removes sessions; the pruner keeps them) and erased the
    // graph before these rows existed: erase again, before the job ends
    if let Err(crate::Error::NotFound(_)) = shared.records.session(scope, &episode.session_id).await {
        shared.graph.delete_user_graph(scope.user_id()).await?;
        tracing::info!(episode_id = %episode_id, "user erased during extraction; graph rows removed");
        return shared.records.finish_event(ev.id, vec![]).await;
    }
    crate::error::fail_point!("semantic.before_finish");
    let follow: Vec<Event> = report
        .entities
        .into_iter()
        .map(|entity_id| Event::EntityUpserted {
            scope: scope.clone(),
            entity_id,
        })
        .collect();
    shared.records.finish_event(ev.id, follow).await?;
    shared.bus.publish(EventKind::EntityUpserted);
    Ok(())
}
