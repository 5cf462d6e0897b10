//! Live configuration reload (`POST /v1/admin/reload`, SIGHUP): the
//! recall tunables change for the next request; every other key waits for
//! a restart and is reported as such.

use serde::Serialize;

use crate::config::{Config, RecallConfig};
use crate::error::Result;
use crate::runtime::Runtime;

/// `[recall]` keys that [`reload`] applies to a running instance.
/// The others change the keyword index's schema or scoring (boosts, BM25
/// prior) or what the stores and workers were opened with, so they need a
/// restart (and, for boosts, no reindex: they apply at query time once restarted).
pub const LIVE_RECALL_KEYS: &[&str] = &[
    "text_weight",
    "vector_weight",
    "foreign_text_weight",
    "min_score",
    "relative_cut",
    "max_entries",
    "overfetch",
    "recent_turns",
    "recent_chars",
    "context_weight",
    "message_evidence_min",
    "fusion",
    "rrf_k",
    "keyword_calibration",
    "vector_calibration",
    "trivial_messages",
    "evidence_snippets",
    "snippet_turn_chars",
    "cross_lingual",
    "cross_lingual_calibration",
];

/// Result of [`reload`]: the dotted config keys whose value changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReloadReport {
    /// Changed keys now in force (recall tunables).
    pub applied: Vec<String>,
    /// Changed keys that keep their old value until a restart.
    pub needs_restart: Vec<String>,
}

/// Applies a re-read configuration to the running instance: the
/// [`LIVE_RECALL_KEYS`] of `[recall]` take effect for the next request;
/// every other changed key is listed in `needs_restart` and keeps its
/// value. Nothing is applied when `new` fails validation.
///
/// # Errors
/// [`crate::Error::Config`] naming the invalid key.
pub fn reload(rt: &Runtime, new: &Config) -> Result<ReloadReport> {
    new.validate()?;
    // compared as they would be in force: unset model keys take the embedder's fit
    let mut new = new.clone();
    new.recall.fit_to(rt.embedder.model_id());
    let new = &new;
    let current = rt.active_config();
    let mut report = ReloadReport::default();
    let (a, b) = (
        flatten_json(&serde_json::to_value(&current)?),
        flatten_json(&serde_json::to_value(new)?),
    );
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut live_changed = false;
    for k in keys {
        if a.get(k) == b.get(k) {
            continue;
        }
        let live = k
            .strip_prefix("recall.")
            .map(|rest| rest.split('.').next().unwrap_or(rest))
            .is_some_and(|field| LIVE_RECALL_KEYS.contains(&field));
        if live {
            live_changed = true;
            report.applied.push(k.clone());
        } else {
            report.needs_restart.push(k.clone());
        }
    }
    if live_changed {
        // the live keys from the new file, every other key as running
        let mut merged = serde_json::to_value(&current.recall)?;
        let fresh = serde_json::to_value(&new.recall)?;
        for key in LIVE_RECALL_KEYS {
            merged[*key] = fresh[*key].clone();
        }
        let recall: RecallConfig = serde_json::from_value(merged)?;
        rt.set_recall(recall);
    }
    tracing::info!(applied = ?report.applied, needs_restart = ?report.needs_restart, "configuration reloaded");
    Ok(report)
}

/// Flattens a JSON object into dotted keys; arrays and scalars are leaves.
fn flatten_json(v: &serde_json::Value) -> std::collections::BTreeMap<String, serde_json::Value> {
    fn walk(
        prefix: &str,
        v: &serde_json::Value,
        out: &mut std::collections::BTreeMap<String, serde_json::Value>,
    ) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, x, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.clone());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk("", v, &mut out);
    out
}

