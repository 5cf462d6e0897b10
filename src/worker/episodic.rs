//! Episodic worker: promotes completed sessions to episodes.
//!
//! Per batch of up to `workers.batch_size` pending `SessionCompleted` events:
//! load each session's messages, summarise (chat model; up to
//! `llm.concurrency` sessions at once; every LLM request is written to
//! `llm_calls` for cost accounting, whatever its outcome), take the abstract,
//! upsert the keyword documents (one commit) and, unless
//! `episodes.defer_vectors`, embed all summaries (vector unit 0) and, with
//! `episodes.embed_turns`, every non-trivial turn (units 1..) in one call and
//! upsert them (one commit); then for each episode write the row, mark the
//! event done and emit `EpisodeCreated` (and, when deferred, the
//! `EpisodeVectors` job that [`super::vectors`] runs) in one transaction. Episode ids are deterministic, index
//! writes are upserts, and the event is marked done last, so a crash at any
//! point replays to the same result (idempotent).
//!
//! A failed job is retried with backoff up to `workers.max_attempts` times
//! and then parked in the dead-letter table; jobs behind it go ahead.

use chrono::{Duration, Utc};

use crate::error::Result;
use crate::llm::{CallLog, TranscriptTurn};
use crate::runtime::Runtime;
use crate::model::{Episode, EpisodeId, Message, Role, Scope};
use crate::recall::abstracts::make_abstract;
use crate::store::{Event, EventKind, KeywordDoc, OutboxEvent, VectorPoint};
use crate::text::clip_with_ellipsis;
use futures::StreamExt;

/// The user and the other turns of a session as `speaker: text` lines, for
/// the keyword index's two transcript fields. With `questions_apart`, the
/// sentences of a user turn that ask something ([`crate::text::is_question`])
/// go with the other turns: a question states nothing about its asker, so
/// "what was the incident number?" asked in a later session must not
/// outweigh the session where the incident was told
/// (`recall.user_questions_as_assistant_text`).
fn role_transcripts(messages: &[Message], questions_apart: bool) -> (String, String) {
    let (mut user, mut other) = (String::new(), String::new());
    let line = |to: &mut String, speaker: &str, text: &str| {
        to.push_str(speaker);
        to.push_str(": ");
        to.push_str(text);
        to.push('\n');
    };
    for m in messages {
        let speaker = m.message.speaker();
        let text = &m.message.content;
        if m.message.role != Role::User {
            line(&mut other, speaker, text);
        } else if !questions_apart {
            line(&mut user, speaker, text);
        } else {
            let (asks, states): (Vec<&str>, Vec<&str>) =
                crate::text::split_sentences(text).into_iter().partition(|s| crate::text::is_question(s));
            if !states.is_empty() {
                line(&mut user, speaker, &states.join(" "));
            }
            if !asks.is_empty() {
                line(&mut other, speaker, &asks.join(" "));
            }
        }
    }
    (user, other)
}

/// What the indexes take from a session's raw messages, beside its episode.
pub(super) struct SessionTexts {
    /// The user turns of the transcript.
    user_text: String,
    /// The assistant (and system) turns of the transcript.
    assistant_text: String,
    /// Texts of vector units 1.. (turns), when `episodes.embed_turns`.
    turns: Vec<String>,
}

impl SessionTexts {
    /// The texts of `episode`'s session, read from the records (a session
    /// erased meanwhile gives empty texts; the episode still indexes its summary).
    pub(super) async fn load(shared: &Runtime, scope: &Scope, episode: &Episode) -> Result<Self> {
        let messages = match shared.records.messages(scope, &episode.session_id).await {
            Ok(m) => m,
            Err(crate::Error::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Self::of(shared, &messages))
    }

    fn of(shared: &Runtime, messages: &[Message]) -> Self {
        let (user_text, assistant_text) =
            role_transcripts(messages, shared.tunables().recall.user_questions_as_assistant_text);
        Self { user_text, assistant_text, turns: turn_units(shared, messages) }
    }
}

struct Prepared {
    event: OutboxEvent,
    episode: Episode,
    texts: SessionTexts,
}

/// Processes one batch; returns how many events it took.
pub async fn drain(shared: &Runtime) -> Result<usize> {
    let events = shared
        .records
        .pending_events(
            &[EventKind::SessionCompleted],
            shared.config.workers.batch_size,
        )
        .await?;
    if events.is_empty() {
        return Ok(0);
    }
    let n = events.len();
    let started = std::time::Instant::now();
    let max_attempts = shared.config.workers.max_attempts;
    let results: Vec<(OutboxEvent, Result<Option<Prepared>>)> = futures::stream::iter(events)
        .map(|ev| async move {
            let r = prepare(shared, &ev).await;
            (ev, r)
        })
        .buffer_unordered(shared.config.llm.concurrency)
        .collect()
        .await;
    let mut prepared = Vec::with_capacity(n);
    for (ev, r) in results {
        match r {
            Ok(Some(p)) => prepared.push(p),
            Ok(None) => {}
            Err(e) => {
                let attempts = ev.attempts + 1;
                if attempts >= super::park_after(&e, max_attempts) {
                    tracing::error!(event_id = %ev.id, attempts, error = %e, "summarisation failed; job parked in the dead-letter table");
                } else {
                    tracing::warn!(event_id = %ev.id, attempts, error = %e, "summarisation failed; will retry");
                }
                super::fail(shared, &ev, &e, super::park_after(&e, max_attempts)).await?;
            }
        }
    }
    prepared.sort_by_key(|p| p.event.id.0);
    let committed = commit(shared, &prepared).await;
    if committed.is_ok() {
        // summarise + embed + index of each job of the batch, in seconds
        let secs = started.elapsed().as_secs_f64();
        for _ in &prepared {
            metrics::histogram!("strata_promotion_duration_seconds").record(secs);
        }
    }
    if let Err(e) = committed {
        tracing::warn!(events = prepared.len(), error = %e, "episode indexing failed");
        for p in &prepared {
            super::fail(shared, &p.event, &e, super::park_after(&e, max_attempts)).await?;
        }
    }
    Ok(n)
}

async fn prepare(shared: &Runtime, ev: &OutboxEvent) -> Result<Option<Prepared>> {
    let Event::SessionCompleted { scope, session_id } = &ev.event else {
        return Ok(None);
    };
    let messages = match shared.records.messages(scope, session_id).await {
        Ok(m) => m,
        Err(crate::Error::NotFound(_)) => {
            // erased meanwhile: nothing to promote; close the event
            shared
                .records
                .fail_event(ev.id, "session no longer exists", 1, vec![])
                .await?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let Some(first) = messages.first() else {
        return Ok(None);
    };
    let turns: Vec<TranscriptTurn> = messages.iter().map(TranscriptTurn::from).collect();
    let started = messages
        .iter()
        .map(|m| m.message.timestamp)
        .min()
        .unwrap_or(first.message.timestamp);
    let log = CallLog::default();
    let summary = shared
        .summarizer
        .summarize(&turns, &started.format("%Y-%m-%d").to_string(), &log)
        .await;
    // cost records are written whatever the outcome: failed attempts cost too
    if let Err(e) = shared
        .records
        .record_llm_calls(scope, Some(session_id), Some(ev.id), log.take())
        .await
    {
        tracing::warn!(event_id = %ev.id, error = %e, "could not record LLM usage");
    }
    let summary = summary?;
    let mut text = summary.text.trim().to_string();
    if text.is_empty() {
        // nothing salient (all chit-chat): keep the first message so the episode still exists
        text = format!(
            "{}: {}",
            first.message.speaker(),
            clip_with_ellipsis(first.message.content.trim(), 200)
        );
    }
    let now = Utc::now();
    let ttl = shared.config.episodes.ttl_days;
    let episode = Episode {
        id: EpisodeId::for_session(scope, session_id),
        session_id: session_id.clone(),
        abstract_: summary
            .abstract_
            .filter(|a| !a.trim().is_empty())
            .unwrap_or_else(|| make_abstract(&text)),
        summary: text,
        summary_kind: summary.kind,
        started_at: started,
        ended_at: messages
            .iter()
            .map(|m| m.message.timestamp)
            .max()
            .unwrap_or(first.message.timestamp),
        created_at: now,
        expires_at: (ttl > 0).then(|| now + Duration::days(ttl as i64)),
    };
    Ok(Some(Prepared {
        event: ev.clone(),
        episode,
        texts: SessionTexts::of(shared, &messages),
    }))
}

/// What the indexes need of one episode.
pub(super) struct IndexItem<'a> {
    pub(super) scope: &'a Scope,
    pub(super) episode: &'a Episode,
    pub(super) texts: &'a SessionTexts,
}

/// Embeds and upserts a batch into both indexes (one embedding call, one
/// commit per index). Returns the number of vector points written.
async fn index(shared: &Runtime, batch: &[IndexItem<'_>]) -> Result<usize> {
    index_keywords(shared, batch).await?;
    index_vectors(shared, batch).await
}

/// Upserts the batch's keyword documents (one commit).
async fn index_keywords(shared: &Runtime, batch: &[IndexItem<'_>]) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let docs = batch
        .iter()
        .map(|p| KeywordDoc {
            scope: p.scope.clone(),
            episode_id: p.episode.id.clone(),
            summary: p.episode.summary.clone(),
            user_text: p.texts.user_text.clone(),
            assistant_text: p.texts.assistant_text.clone(),
            // the session's days are keyword terms too, never shown
            dates: crate::recall::dates::session_date_terms(
                p.episode.started_at,
                p.episode.ended_at,
            ),
            date_tokens: crate::recall::dates::date_tokens(
                p.episode.started_at,
                p.episode.ended_at,
            ),
        })
        .collect();
    shared.keyword.upsert(docs).await
}

/// Embeds the batch's vector units (unit 0 = summary or the mean of the
/// turns, units 1.. = turns; one embedding call) and upserts them (one
/// commit). Returns the number of vector points written.
pub(super) async fn index_vectors(shared: &Runtime, batch: &[IndexItem<'_>]) -> Result<usize> {
    if batch.is_empty() {
        return Ok(0);
    }
    let from_turns = shared.config.episodes.summary_vector_from_turns;
    let mut texts = Vec::new();
    let mut owners = Vec::new();
    for (i, p) in batch.iter().enumerate() {
        if !(from_turns && !p.texts.turns.is_empty()) {
            texts.push(p.episode.summary.clone());
            owners.push((i, 0u32));
        }
        for (j, t) in p.texts.turns.iter().enumerate() {
            texts.push(t.clone());
            owners.push((i, j as u32 + 1));
        }
    }
    let t_embed = std::time::Instant::now();
    let mut vectors = shared.embedder.embed(&texts).await?;
    let embed_ms = t_embed.elapsed().as_millis() as u64;
    if from_turns {
        for (i, p) in batch.iter().enumerate() {
            if p.texts.turns.is_empty() {
                continue;
            }
            let mut mean = vec![0f32; shared.embedder.dim()];
            for (v, _) in vectors.iter().zip(&owners).filter(|(_, o)| o.0 == i) {
                mean.iter_mut().zip(v).for_each(|(m, x)| *m += x);
            }
            let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
            mean.iter_mut().for_each(|m| *m /= norm);
            vectors.push(mean);
            owners.push((i, 0));
        }
    }
    let points: Vec<VectorPoint> = owners
        .into_iter()
        .zip(vectors)
        .map(|((i, unit), vector)| VectorPoint {
            scope: batch[i].scope.clone(),
            episode_id: batch[i].episode.id.clone(),
            unit,
            vector,
        })
        .collect();
    let n = points.len();
    shared.vectors.upsert(points).await?;
    tracing::debug!(episodes = batch.len(), texts = texts.len(), embed_ms, "episode vectors written");
    Ok(n)
}

async fn commit(shared: &Runtime, batch: &[Prepared]) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let items: Vec<IndexItem<'_>> = batch
        .iter()
        .map(|p| IndexItem {
            scope: p.event.event.scope(),
            episode: &p.episode,
            texts: &p.texts,
        })
        .collect();
    let defer = shared.config.episodes.defer_vectors;
    index_keywords(shared, &items).await?;
    crate::error::fail_point!("promotion.after_keywords");
    if !defer {
        index_vectors(shared, &items).await?;
    }
    crate::error::fail_point!("promotion.before_record");
    for p in batch {
        let scope = p.event.event.scope();
        let promoted = crate::webhook::deliveries(
            &shared.config.webhooks,
            scope,
            crate::model::webhook::WebhookEventType::SessionPromoted,
            serde_json::json!({
                "session_id": p.episode.session_id.as_str(),
                "episode_id": p.episode.id.as_str(),
                "summary_kind": p.episode.summary_kind.as_str(),
                "vectors_indexed": !defer,
            }),
        );
        let announce = !promoted.is_empty();
        match shared.records.put_episode(scope, &p.episode, p.event.id, defer, promoted).await {
            Ok(()) => {}
            Err(crate::Error::NotFound(_)) => {
                // erased while summarised: take back what was just indexed (the
                // erasure, not knowing this episode, could not) and close the job
                let ids = std::slice::from_ref(&p.episode.id);
                shared.keyword.delete(scope, ids).await?;
                shared.vectors.delete(scope, ids).await?;
                shared.keyword.compact().await?;
                shared.records.fail_event(p.event.id, "session erased while promoted", 1, vec![]).await?;
                tracing::info!(episode_id = %p.episode.id, "session erased during promotion; its index entries removed");
                continue;
            }
            Err(e) => return Err(e),
        }
        // (the EpisodeVectors job needs no wake-up: this loop takes it next)
        shared.bus.publish(EventKind::EpisodeCreated);
        if announce {
            shared.bus.publish(EventKind::WebhookDelivery);
        }
        tracing::debug!(episode_id = %p.episode.id, session_id = %p.episode.session_id, "episode created");
    }
    Ok(())
}

/// Re-indexes stored episodes (for `strata reindex`): rebuilds the keyword
/// document and every vector unit of each from the system of record, exactly
/// as promotion built them. Returns the number of vector points written.
pub async fn reindex_batch(shared: &Runtime, batch: &[(Scope, Episode)]) -> Result<usize> {
    let mut texts = Vec::with_capacity(batch.len());
    for (scope, ep) in batch {
        texts.push(SessionTexts::load(shared, scope, ep).await?);
    }
    let items: Vec<IndexItem<'_>> = batch
        .iter()
        .enumerate()
        .map(|(i, (scope, ep))| IndexItem {
            scope,
            episode: ep,
            texts: &texts[i],
        })
        .collect();
    index(shared, &items).await
}

/// Texts of the turn vector units, when `episodes.embed_turns`: each
/// non-trivial user turn that states something (one that only asks, unless
/// `episodes.embed_user_questions`, gives none), and
/// the assistant turns with `episodes.embed_assistant_turns`.
fn turn_units(shared: &Runtime, messages: &[Message]) -> Vec<String> {
    let episodes = &shared.config.episodes;
    if !episodes.embed_turns {
        return Vec::new();
    }
    messages
        .iter()
        .filter(|m| !shared.is_trivial(&m.message.content))
        .filter_map(|m| {
            let text = &m.message.content;
            let kept = if m.message.role != Role::User {
                episodes.embed_assistant_turns.then(|| text.clone())
            } else if episodes.embed_user_questions {
                Some(text.clone())
            } else {
                // a turn that also states something stays whole: its question
                // is about what it states ("We moved to Portland. Any tips?")
                let states = crate::text::split_sentences(text).into_iter().any(|s| !crate::text::is_question(s));
                states.then(|| text.clone())
            };
            kept.map(|t| format!("{}: {}", m.message.speaker(), t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MessageId, NewMessage, SessionId};

    #[test]
    fn a_users_questions_are_indexed_with_the_assistant_turns() {
        let at = Utc::now();
        let m = |seq: i64, message: NewMessage| Message { id: MessageId(seq), session_id: SessionId::new("s").unwrap(), seq, message };
        let mut mina = NewMessage::user("Big news: I moved to Portland. What was the incident number again?", at);
        mina.name = Some("Mina".into());
        let messages = [m(0, mina), m(1, NewMessage { role: Role::Assistant, ..NewMessage::user("It was INC-2026-117.", at) })];
        let (user, other) = role_transcripts(&messages, true);
        assert_eq!(user, "Mina: Big news: I moved to Portland.\n");
        assert_eq!(other, "Mina: What was the incident number again?\nassistant: It was INC-2026-117.\n");
        let (user, other) = role_transcripts(&messages, false);
        assert_eq!(user, "Mina: Big news: I moved to Portland. What was the incident number again?\n");
        assert_eq!(other, "assistant: It was INC-2026-117.\n");
    }
}
