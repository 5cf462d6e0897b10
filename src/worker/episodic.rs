//! Episodic worker: promotes completed sessions to episodes.
//!
//! Per batch of up to `workers.batch_size` pending `SessionCompleted` events:
//! load each session's messages, summarise (chat model), take the abstract,
//! embed all summaries (vector unit 0) and, with `episodes.embed_turns`,
//! every non-trivial turn (units 1..) in one call, upsert both indexes (one commit each),
//! then for each episode write the row, mark the event done and emit
//! `EpisodeCreated` in one transaction. Episode ids are deterministic, index
//! writes are upserts, and the event is marked done last, so a crash at any
//! point replays to the same result (idempotent).

use chrono::{Duration, Utc};
use std::sync::Arc;
use tokio::sync::watch;

use super::PARK_AFTER_ATTEMPTS;
use crate::error::Result;
use crate::llm::TranscriptTurn;
use crate::memory::Shared;
use crate::model::{Episode, EpisodeId, Message};
use crate::recall::abstracts::make_abstract;
use crate::store::{Event, EventKind, KeywordDoc, OutboxEvent, VectorPoint};
use crate::text::clip_with_ellipsis;

/// Renders a session as `speaker: text` lines (the raw transcript).
pub fn transcript(messages: &[Message]) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str(m.message.speaker());
        s.push_str(": ");
        s.push_str(&m.message.content);
        s.push('\n');
    }
    s
}

struct Prepared {
    event: OutboxEvent,
    episode: Episode,
    raw: String,
    /// Texts of vector units 1.. (turns), when `episodes.embed_turns`.
    turns: Vec<String>,
}

/// Runs until `stop` turns true and the outbox holds nothing processable.
pub async fn run(shared: Arc<Shared>, wake: flume::Receiver<()>, mut stop: watch::Receiver<bool>) {
    loop {
        match drain(&shared).await {
            Ok(n) if n > 0 => continue,
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "episodic worker batch failed"),
        }
        if let Err(e) = shared.vectors.optimize().await {
            tracing::warn!(error = %e, "vector index optimisation failed");
        }
        if *stop.borrow() {
            break;
        }
        let backoff_pending = shared.records.count_pending(&[EventKind::SessionCompleted]).await.unwrap_or(0) > 0;
        let wait = if backoff_pending { std::time::Duration::from_millis(250) } else { std::time::Duration::from_secs(3600) };
        tokio::select! {
            r = wake.recv_async() => { if r.is_err() && !backoff_pending { /* bus closed */ } }
            _ = stop.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        if *stop.borrow() && shared.records.count_pending(&[EventKind::SessionCompleted]).await.unwrap_or(0) == 0 {
            break;
        }
    }
    tracing::debug!("episodic worker stopped");
}

/// Processes one batch; returns how many events it took.
pub async fn drain(shared: &Shared) -> Result<usize> {
    let events = shared.records.pending_events(&[EventKind::SessionCompleted], shared.config.workers.batch_size).await?;
    if events.is_empty() {
        return Ok(0);
    }
    let n = events.len();
    let mut prepared = Vec::with_capacity(n);
    for ev in events {
        match prepare(shared, &ev).await {
            Ok(Some(p)) => prepared.push(p),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(event_id = %ev.id, attempts = ev.attempts + 1, error = %e, "summarisation failed");
                shared.records.fail_event(ev.id, &e.to_string(), PARK_AFTER_ATTEMPTS).await?;
            }
        }
    }
    if let Err(e) = commit(shared, &prepared).await {
        tracing::warn!(events = prepared.len(), error = %e, "episode indexing failed");
        for p in &prepared {
            shared.records.fail_event(p.event.id, &e.to_string(), PARK_AFTER_ATTEMPTS).await?;
        }
    }
    Ok(n)
}

async fn prepare(shared: &Shared, ev: &OutboxEvent) -> Result<Option<Prepared>> {
    let Event::SessionCompleted { scope, session_id } = &ev.event else {
        return Ok(None);
    };
    let messages = match shared.records.messages(scope, session_id).await {
        Ok(m) => m,
        Err(crate::Error::NotFound(_)) => {
            // erased meanwhile: nothing to promote; close the event
            shared.records.fail_event(ev.id, "session no longer exists", 1).await?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let Some(first) = messages.first() else { return Ok(None) };
    let turns: Vec<TranscriptTurn> = messages
        .iter()
        .map(|m| TranscriptTurn { speaker: m.message.speaker().to_string(), text: m.message.content.clone() })
        .collect();
    let summary = shared.chat.summarize(&turns).await?;
    let mut text = summary.text.trim().to_string();
    if text.is_empty() {
        // nothing salient (all chit-chat): keep the first message so the episode still exists
        text = format!("{}: {}", first.message.speaker(), clip_with_ellipsis(first.message.content.trim(), 200));
    }
    let now = Utc::now();
    let ttl = shared.config.episodes.ttl_days;
    let episode = Episode {
        id: EpisodeId::for_session(scope, session_id),
        session_id: session_id.clone(),
        abstract_: make_abstract(&text),
        summary: text,
        summary_kind: summary.kind,
        started_at: messages.iter().map(|m| m.message.timestamp).min().unwrap_or(first.message.timestamp),
        ended_at: messages.iter().map(|m| m.message.timestamp).max().unwrap_or(first.message.timestamp),
        created_at: now,
        expires_at: (ttl > 0).then(|| now + Duration::days(ttl as i64)),
    };
    let turns = if shared.config.episodes.embed_turns {
        messages
            .iter()
            .filter(|m| !shared.is_trivial(&m.message.content))
            .map(|m| format!("{}: {}", m.message.speaker(), m.message.content))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Some(Prepared { event: ev.clone(), episode, raw: transcript(&messages), turns }))
}

async fn commit(shared: &Shared, batch: &[Prepared]) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let scope_of = |p: &Prepared| p.event.event.scope().clone();
    // unit 0 = summary, units 1.. = turns; one embedding call for the whole batch
    let mut texts = Vec::new();
    let mut owners = Vec::new();
    for (i, p) in batch.iter().enumerate() {
        texts.push(p.episode.summary.clone());
        owners.push((i, 0u32));
        for (j, t) in p.turns.iter().enumerate() {
            texts.push(t.clone());
            owners.push((i, j as u32 + 1));
        }
    }
    let vectors = shared.embedder.embed(&texts).await?;
    let docs = batch
        .iter()
        .map(|p| KeywordDoc { scope: scope_of(p), episode_id: p.episode.id.clone(), summary: p.episode.summary.clone(), raw: p.raw.clone() })
        .collect();
    let points = owners
        .into_iter()
        .zip(vectors)
        .map(|((i, unit), vector)| VectorPoint { scope: scope_of(&batch[i]), episode_id: batch[i].episode.id.clone(), unit, vector })
        .collect();
    shared.keyword.upsert(docs).await?;
    shared.vectors.upsert(points).await?;
    for p in batch {
        shared.records.put_episode(&scope_of(p), &p.episode, p.event.id).await?;
        shared.bus.publish(EventKind::EpisodeCreated);
        tracing::debug!(episode_id = %p.episode.id, session_id = %p.episode.session_id, "episode created");
    }
    Ok(())
}
