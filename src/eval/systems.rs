//! What every eval sets up, compares and records, shared by the LoCoMo and
//! LongMemEval replays: the eval's config ([`eval_config`]), the retrieval
//! configurations ([`CONFIGS`]) and the per-question candidate features
//! (`--features FILE`).

use serde_json::json;
use std::collections::BTreeMap;

use crate::config::{Config, Fusion};
use crate::error::Result;
use crate::model::Scope;
use crate::recall::fusion::Retrievers;
use crate::Memory;

/// Idle timeout of an eval's sessions, in seconds (7 days): longer than any
/// run, so the inject probes' open sessions are never ended and promoted.
pub const PROBE_IDLE_SECS: u64 = 7 * 24 * 3600;

/// `config` for a replay: its own temporary `data_dir` (returned; removed
/// when dropped), no pruner, sessions that never idle out ([`PROBE_IDLE_SECS`]).
///
/// # Errors
/// I/O errors creating the directory.
pub fn eval_config(config: &Config) -> Result<(Config, tempfile::TempDir)> {
    let dir = tempfile::Builder::new().prefix("strata-eval-").tempdir()?;
    let mut c = config.clone();
    c.data_dir = dir.path().to_path_buf();
    c.pruner.enabled = false;
    c.sessions.idle_timeout_secs = PROBE_IDLE_SECS;
    Ok((c, dir))
}

/// The configurations compared in one run.
pub const CONFIGS: &[(&str, Retrievers, Option<Fusion>)] = &[
    ("strata", Retrievers::Hybrid, Some(Fusion::Weighted)),
    ("keyword_only", Retrievers::KeywordOnly, None),
    ("vector_only", Retrievers::VectorOnly, None),
    ("rrf", Retrievers::Hybrid, Some(Fusion::Rrf)),
];

/// The raw retriever scores of every episode of `scope` for `query`, as one
/// JSON object (a line of `--features FILE`), for fitting calibration and
/// fusion offline against labelled questions:
/// `{"reference": f32, "terms": n, "candidates": {session_id: [bm25 | null, cosine | null]}}`.
/// BM25 is the keyword index's score with the same query (relative dates
/// resolved against `as_of`, now when `None`) as `memory_search`; cosine is the
/// best unit of the episode for the query's embedding. `null` means the
/// retriever does not return the episode at all (no query term in it).
///
/// # Errors
/// Store or embedder failures.
pub async fn candidate_features(
    mem: &Memory,
    scope: &Scope,
    query: &str,
    as_of: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<serde_json::Value> {
    let s = mem.runtime();
    let date_tokens = if s.config.recall.relative_date_boost > 0.0 {
        crate::recall::dates::resolve_relative(query, as_of.unwrap_or_else(chrono::Utc::now))
    } else {
        String::new()
    };
    let all = s.vectors.count(scope).await?.max(1);
    let kw = s
        .keyword
        .search(
            scope,
            &crate::store::KeywordQuery {
                text: query,
                date_tokens: &date_tokens,
            },
            all,
        )
        .await?;
    let mut v = s.embedder.embed_query(&[query.to_string()]).await?.remove(0);
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    let vec = s.vectors.search(scope, &v, all).await?;
    let mut cands: BTreeMap<String, (Option<f32>, Option<f32>)> = BTreeMap::new();
    let ids: Vec<crate::model::EpisodeId> = kw
        .hits
        .iter()
        .chain(&vec)
        .map(|h| h.episode_id.clone())
        .collect();
    let names: BTreeMap<String, String> = s
        .records
        .episodes(scope, &ids, chrono::Utc::now())
        .await?
        .into_iter()
        .map(|e| (e.id.to_string(), e.session_id.to_string()))
        .collect();
    for h in &kw.hits {
        if let Some(n) = names.get(h.episode_id.as_str()) {
            cands.entry(n.clone()).or_default().0 = Some(h.score);
        }
    }
    for h in &vec {
        if let Some(n) = names.get(h.episode_id.as_str()) {
            cands.entry(n.clone()).or_default().1 = Some(h.score);
        }
    }
    Ok(json!({"reference": kw.reference_score, "terms": kw.query_terms, "candidates": cands}))
}

