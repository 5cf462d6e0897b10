//! Semantic worker: `EpisodeCreated` → entities and relations in the graph.
//!
//! Per event: load the episode and its session; name the user's turns
//! (`user_turns_named`); extract with the runtime's
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

/// The session's turns as the extractor reads them, with the scope's user
/// as a speaker of their own: a user turn without a `name` (what most
/// backends send) is labelled with the name the session's other user turns
/// carry when they all carry one and the same, else with the scope's
/// `user_id`. So "I work at Acme Robotics" said by an unnamed user becomes
/// `<user> -[works_at]-> Acme Robotics`, and "my sister Yuna" `Yuna
/// -[sister_of]-> <user>`, as for a named speaker. A session with user turns
/// of two or more names (a group chat) labels its unnamed ones with the
/// `user_id`. Assistant, system and tool turns keep their role.
pub(crate) fn user_turns_named(scope: &crate::model::Scope, messages: &[crate::model::Message]) -> Vec<TranscriptTurn> {
    use crate::model::Role;
    let mut names = messages
        .iter()
        .filter(|m| m.message.role == Role::User)
        .filter_map(|m| m.message.name.as_deref().map(str::trim).filter(|n| !n.is_empty()));
    let first = names.next();
    let user = match first {
        Some(n) if names.all(|other| other == n) => n,
        _ => scope.user_id(),
    };
    messages
        .iter()
        .map(|m| {
            let mut t = TranscriptTurn::from(m);
            if m.message.role == Role::User && m.message.name.as_deref().is_none_or(|n| n.trim().is_empty()) {
                t.speaker = user.to_string();
            }
            t
        })
        .collect()
}

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
    let turns = user_turns_named(scope, &messages);
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
    let mut extraction = llm?;
    let assistant: Vec<bool> = messages.iter().map(|m| m.message.role == crate::model::Role::Assistant).collect();
    let dropped = crate::graph::extract::voices::keep_what_others_say(&turns, &assistant, &mut extraction);
    tracing::debug!(episode_id = %episode_id, dropped, "names only the assistant said left out");
    if let Some(typer) = crate::graph::typer::EntityTyper::shipped() {
        let mode = shared.config.graph.entity_typer;
        let typed = crate::graph::typer::retype(shared.embedder.as_ref(), typer, mode, &turns, &speakers, &mut extraction).await?;
        tracing::debug!(episode_id = %episode_id, typed, "entities typed by the embedder");
    }
    let framed = crate::graph::extract::frames::apply(&turns, &mut extraction);
    tracing::debug!(episode_id = %episode_id, framed, "relations from typed frames");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, MessageId, NewMessage, Scope, SessionId};

    fn messages(turns: &[(&str, Option<&str>)]) -> Vec<Message> {
        let now = Utc::now();
        turns
            .iter()
            .enumerate()
            .map(|(i, (role, name))| {
                let mut m = if *role == "user" { NewMessage::user("hi", now) } else { NewMessage::assistant("hi", now) };
                m.name = name.map(str::to_string);
                Message { id: MessageId(i as i64), session_id: SessionId::new("s").unwrap(), seq: i as i64, message: m }
            })
            .collect()
    }

    fn speakers(turns: &[(&str, Option<&str>)]) -> Vec<String> {
        let scope = Scope::new("u_1", "bot").unwrap();
        user_turns_named(&scope, &messages(turns)).into_iter().map(|t| t.speaker).collect()
    }

    #[test]
    fn unnamed_user_turns_take_the_users_name_or_id() {
        // no name anywhere: the user_id; the assistant keeps its role
        assert_eq!(speakers(&[("user", None), ("assistant", None)]), ["u_1", "assistant"]);
        // one name in the session: every user turn is that person
        assert_eq!(speakers(&[("user", Some("Mina")), ("user", None), ("user", Some(" "))]), ["Mina", "Mina", "Mina"]);
        // two names (a group chat): the unnamed turns are the scope's user
        assert_eq!(speakers(&[("user", Some("Jon")), ("user", Some("Gina")), ("user", None)]), ["Jon", "Gina", "u_1"]);
    }
}
