//! Dedup worker: `EntityUpserted` → candidate pairs in the same scope →
//! guards → merge, ask the LLM, or keep apart (see [`crate::graph::dedup`]).
//!
//! Candidates: live entities of the same scope whose type is the same or
//! unknown. Similarity is the best of equal aliases, Jaro-Winkler of the
//! identity keys and, for candidates past `graph.embedding_prefilter`, the
//! cosine of the name embeddings, capped just under `graph.merge_threshold`
//! (it can send a pair to the LLM, never merge it alone). The older entity
//! survives a merge. Every
//! judged pair is written to `dedup_log`; merges go to the `merges` log and
//! can be undone (`strata graph unmerge ID`).

use std::sync::Arc;

use crate::error::Result;
use crate::graph::dedup::{decide, name_similarity, Decision, LoggedDecision};
use crate::graph::{Entity, UNKNOWN_TYPE};
use crate::llm::CallLog;
use crate::runtime::Runtime;
use crate::store::{Event, EventKind, OutboxEvent};

/// Most candidates compared by name embedding per upserted entity.
pub const MAX_EMBEDDED_CANDIDATES: usize = 32;
/// Most entities of a scope scanned for candidates.
pub const MAX_SCANNED: usize = 50_000;

/// Runs until stopped.
pub async fn run(
    shared: Arc<Runtime>,
    wake: flume::Receiver<()>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::serve(
        shared,
        &[EventKind::EntityUpserted],
        wake,
        stop,
        |s| async move { drain(&s).await },
    )
    .await
}

/// Processes one batch; returns how many events it took.
pub async fn drain(shared: &Runtime) -> Result<usize> {
    super::drain_each(shared, EventKind::EntityUpserted, "dedup", |s, e| {
        Box::pin(process(s, e))
    })
    .await
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum()
}

async fn process(shared: &Runtime, ev: &OutboxEvent) -> Result<()> {
    let Event::EntityUpserted { scope, entity_id } = &ev.event else {
        return shared.records.finish_event(ev.id, vec![]).await;
    };
    let g = &shared.config.graph;
    let Some(entity) = shared
        .graph
        .entities(scope, std::slice::from_ref(entity_id))
        .await?
        .into_iter()
        .next()
    else {
        // merged away or erased meanwhile
        return shared.records.finish_event(ev.id, vec![]).await;
    };
    let all = shared
        .graph
        .entities_of_type(scope, None, MAX_SCANNED)
        .await?;
    let mut scored: Vec<(Entity, f64)> = all
        .into_iter()
        .filter(|c| {
            c.id != entity.id
                && (c.kind == entity.kind || c.kind == UNKNOWN_TYPE || entity.kind == UNKNOWN_TYPE)
        })
        .map(|c| {
            let s = name_similarity(&entity, &c);
            (c, s)
        })
        .filter(|(_, s)| *s >= g.embedding_prefilter)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(MAX_EMBEDDED_CANDIDATES);
    if scored.is_empty() {
        return shared.records.finish_event(ev.id, vec![]).await;
    }
    // name embeddings can only raise a score (synonyms, transliterations), and only
    // up to asking: e5's cosines of two short unknown names run above 0.99
    // ("Zefebaz Cafe" / "Zefiboz Cafe"), so a cosine alone never merges (offline, such
    // pairs stay apart; with an LLM it is asked)
    let mut names = vec![entity.name.clone()];
    names.extend(scored.iter().map(|(c, _)| c.name.clone()));
    if let Ok(vecs) = shared.embedder.embed(&names).await {
        let ceiling = g.ask_threshold.max(g.merge_threshold - 1e-6);
        for (i, (_, s)) in scored.iter_mut().enumerate() {
            *s = s.max(cosine(&vecs[0], &vecs[i + 1]).min(ceiling));
        }
    }
    let mut merges = Vec::new();
    let mut asks = Vec::new();
    let mut log_rows = Vec::new();
    for (c, s) in &scored {
        if shared.graph.kept_apart(scope, &entity.id, &c.id).await? {
            log_rows.push((
                c.id.clone(),
                "keep",
                *s,
                "an operator undid their merge".to_string(),
            ));
            continue;
        }
        match decide(&entity, c, *s, g.merge_threshold, g.ask_threshold) {
            Decision::Merge => merges.push((c.clone(), *s, format!("similarity {s:.3}"))),
            Decision::Ask => asks.push((c.clone(), *s)),
            Decision::Keep(why) => log_rows.push((c.id.clone(), "keep", *s, why)),
        }
    }
    if !asks.is_empty() {
        let pairs: Vec<(Entity, Entity)> = asks
            .iter()
            .map(|(c, _)| (entity.clone(), c.clone()))
            .collect();
        let log = CallLog::default();
        let answer = shared.extractor.confirm_same(&pairs, &log).await;
        let _ = shared
            .records
            .record_llm_calls(scope, None, Some(ev.id), log.take())
            .await;
        match answer? {
            Some(same) => {
                for ((c, s), yes) in asks.into_iter().zip(same) {
                    if yes {
                        merges.push((c, s, format!("similarity {s:.3}, confirmed by the LLM")));
                    } else {
                        log_rows.push((
                            c.id.clone(),
                            "keep",
                            s,
                            "the LLM said different".to_string(),
                        ));
                    }
                }
            }
            None => {
                for (c, s) in asks {
                    log_rows.push((
                        c.id.clone(),
                        "keep",
                        s,
                        "ambiguous; no LLM to confirm".to_string(),
                    ));
                }
            }
        }
    }
    let mut notes = Vec::new();
    for (c, s, reason) in merges {
        // the older entity survives
        let (survivor, merged) =
            if (c.created_at, c.id.as_str()) <= (entity.created_at, entity.id.as_str()) {
                (&c, &entity)
            } else {
                (&entity, &c)
            };
        match shared
            .graph
            .merge(scope, &survivor.id, &merged.id, &reason)
            .await
        {
            Ok(id) => {
                tracing::info!(merge_id = id, survivor = %survivor.name, merged = %merged.name, "entities merged");
                notes.extend(crate::webhook::deliveries(
                    &shared.config.webhooks,
                    scope,
                    crate::model::webhook::WebhookEventType::EntityMerged,
                    serde_json::json!({
                        "merge_id": id,
                        "survivor_id": survivor.id.to_string(),
                        "merged_id": merged.id.to_string(),
                        "similarity": s,
                    }),
                ));
                log_rows.push((c.id.clone(), "merge", s, reason));
            }
            // one side was merged away by an earlier pair of this batch
            Err(crate::Error::NotFound(_)) => {
                log_rows.push((c.id.clone(), "skip", s, "already merged".into()))
            }
            Err(e) => return Err(e),
        }
        if merged.id == entity.id {
            break;
        }
    }
    let rows = log_rows
        .into_iter()
        .map(|(candidate, decision, similarity, reason)| LoggedDecision {
            candidate,
            decision,
            similarity,
            reason,
        })
        .collect();
    shared.records.log_dedup(scope, &entity.id, rows).await?;
    crate::error::fail_point!("dedup.before_finish");
    // the merge notifications are written with the job's end: a crash
    // between a merge and here replays the job, which finds the entity merged
    // away and, like any replay, announces nothing (docs/webhooks.md)
    let announce = !notes.is_empty();
    shared.records.finish_event(ev.id, notes).await?;
    if announce {
        shared.bus.publish(EventKind::WebhookDelivery);
    }
    Ok(())
}
