//! The chat model's graph extraction: the session in pieces that fit the
//! context ([`crate::llm::openai::split_transcript`], less the prompt's
//! example), each piece's answer kept only where the text says its names
//! (`grounded`), then combined with the offline patterns
//! ([`super::combine`]) unless `graph.combine_offline = false`. Duplicate
//! pairs are judged with `prompts/dedup_entities`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::GraphExtractor;
use crate::error::Result;
use crate::llm::openai::{split_transcript, OpenAiChat};
use crate::llm::prompts::Task;
use crate::llm::CallLog;
use crate::model::graph::{Entity, Extraction};
use crate::model::TranscriptTurn;

/// A [`GraphExtractor`] on an OpenAI-compatible chat model.
pub struct ModelExtractor {
    chat: Arc<OpenAiChat>,
    combine_offline: bool,
}

impl ModelExtractor {
    /// Extracts with `chat`; with `combine_offline` the offline patterns'
    /// result is kept and the model's added to it ([`super::combine::combine`]).
    pub fn new(chat: Arc<OpenAiChat>, combine_offline: bool) -> Self {
        Self { chat, combine_offline }
    }
}

#[async_trait]
impl GraphExtractor for ModelExtractor {
    fn id(&self) -> String {
        self.chat.id()
    }

    async fn extract(
        &self,
        summary: &str,
        turns: &[TranscriptTurn],
        speakers: &[String],
        started_at: &str,
        log: &CallLog,
    ) -> Result<Extraction> {
        // the session itself, in pieces that fit the context (a small model finds little in a
        // short summary); the summary only when the turns are gone
        let pieces = if turns.is_empty() {
            vec![summary.to_string()]
        } else {
            split_transcript(turns, self.chat.input_budget().saturating_sub(EXTRACT_EXAMPLE_TOKENS).max(256))
        };
        let mut ex = Extraction::default();
        for piece in &pieces {
            let vars = json!({"summary": summary, "transcript": piece, "speakers": speakers, "started_at": started_at});
            let v = self.chat.complete_json(Task::ExtractEntitiesRelations, &vars, log).await?;
            read_extraction(&v, piece, &mut ex);
        }
        Ok(if self.combine_offline {
            super::combine::combine(super::offline::extract(turns), ex, turns)
        } else {
            ex
        })
    }

    async fn confirm_same(&self, pairs: &[(Entity, Entity)], log: &CallLog) -> Result<Option<Vec<bool>>> {
        let side = |e: &Entity| json!({"name": e.name, "type": e.kind, "aliases": e.aliases, "context": ""});
        let items: Vec<Value> = pairs
            .iter()
            .enumerate()
            .map(|(i, (a, b))| json!({"id": i.to_string(), "a": side(a), "b": side(b)}))
            .collect();
        let v = self
            .chat
            .complete_json(Task::DedupEntities, &json!({"pairs": items}), log)
            .await?;
        let mut out = vec![false; pairs.len()];
        for d in v["decisions"].as_array().into_iter().flatten() {
            if let Some(i) = d["id"]
                .as_str()
                .and_then(|s| s.parse::<usize>().ok())
                .filter(|&i| i < out.len())
            {
                out[i] = d["same"].as_bool().unwrap_or(false);
            }
        }
        Ok(Some(out))
    }
}

/// Tokens the extraction prompt's instructions and example take (measured on
/// `prompts/extract_entities_relations.toml` v2 at 3 bytes per token, rounded up).
const EXTRACT_EXAMPLE_TOKENS: u32 = 700;

/// True when `name` is said in `text`: its identity key occurs in the
/// text's lowercase form, or, for a phrase, every word of 3 letters or more
/// does. A small model copies the prompt's example ("Lisbon", "Acme") or
/// invents; what the session never says is no fact of it.
fn grounded(name: &str, text_lower: &str) -> bool {
    let key = crate::graph::identity_key(name);
    if key.is_empty() {
        return false;
    }
    text_lower.contains(&key)
        || key
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .fold(None, |all, w| Some(all.unwrap_or(true) && text_lower.contains(w)))
            .unwrap_or(false)
}

/// Appends a schema-valid extraction answer's entities and relations to `ex`,
/// keeping only those whose names the input `text` says ([`grounded`]).
fn read_extraction(v: &Value, text: &str, ex: &mut Extraction) {
    let lower = text.to_lowercase();
    let (mut dropped_entities, mut dropped_relations) = (0usize, 0usize);
    for e in v["entities"].as_array().into_iter().flatten() {
        if !grounded(e["name"].as_str().unwrap_or_default(), &lower) {
            dropped_entities += 1;
            continue;
        }
        ex.entities.push(crate::model::graph::EntityMention {
            name: e["name"].as_str().unwrap_or_default().to_string(),
            kind: e["type"]
                .as_str()
                .unwrap_or(crate::model::graph::UNKNOWN_TYPE)
                .to_string(),
            aliases: e["aliases"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
        });
    }
    for r in v["relations"].as_array().into_iter().flatten() {
        let ends = [r["source"].as_str().unwrap_or_default(), r["target"].as_str().unwrap_or_default()];
        if !ends.iter().all(|n| grounded(n, &lower)) {
            dropped_relations += 1;
            continue;
        }
        let valid_from = r["valid_from"]
            .as_str()
            .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| d.and_utc());
        ex.relations.push(crate::model::graph::RelationMention {
            source: r["source"].as_str().unwrap_or_default().to_string(),
            predicate: r["predicate"].as_str().unwrap_or_default().to_string(),
            target: r["target"].as_str().unwrap_or_default().to_string(),
            valid_from,
        });
    }
    if dropped_entities + dropped_relations > 0 {
        metrics::counter!("strata_llm_ungrounded_total").increment((dropped_entities + dropped_relations) as u64);
        tracing::info!(dropped_entities, dropped_relations, "extracted names the session never says were dropped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracted_names_the_text_never_says_are_dropped() {
        let v = serde_json::json!({
            "entities": [{"name": "Caroline", "type": "person", "aliases": []}, {"name": "Lisbon", "type": "place", "aliases": []}],
            "relations": [
                {"source": "Caroline", "predicate": "likes", "target": "pottery classes", "valid_from": null},
                {"source": "Caroline", "predicate": "works_at", "target": "Acme", "valid_from": null}
            ]
        });
        let mut ex = Extraction::default();
        read_extraction(&v, "Caroline: I signed up for a pottery class, and my classes start soon.", &mut ex);
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["Caroline"]);
        let targets: Vec<&str> = ex.relations.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, vec!["pottery classes"], "a phrase counts when its words are said");
    }
}
